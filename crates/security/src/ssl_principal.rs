//! `ssl.principal.mapping.rules`: how Kafka 4.3.1 turns a TLS client's
//! certificate subject (as [`crate::x509::subject_name`] prints it) into
//! the name of its principal, e.g. `CN=alice,OU=eng` into `alice`.
//!
//! The value is a comma-separated list of `DEFAULT` (the subject as is) and
//! `RULE:pattern/replacement/` with an optional `L` or `U` (lower or upper
//! case the result). The first rule whose pattern matches the whole subject
//! gives the name. Kafka splits the list with a regular expression whose
//! corner cases are part of the config language (a rule it cannot read is
//! skipped over or refused in ways users have learnt), so the splitter here
//! reproduces what that expression does rather than a cleaner grammar.
//!
//! Patterns are Java regular expressions; they run on the `regex` crate
//! after [`java_regex`] rewrites the constructs the two read differently.
//! What the crate lacks (look-around, back-references, possessive
//! quantifiers) makes the rule invalid here, where Java would accept it.
//! Replacements follow Java's `Matcher.replaceAll` syntax after Kafka's own
//! rewriting of group references beyond the pattern's groups.

mod java_regex;
mod replacement;
mod splitter;

use std::fmt;

use regex::Regex;
use thiserror::Error;

use replacement::Template;
use splitter::{parse_rule, split_rules, ParsedRule};

/// A rule list Kafka would refuse (its messages), or a pattern the `regex`
/// crate cannot run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidRule {
    #[error("Invalid rule: `{rule}`, unmatched substring: `{unmatched}`")]
    Unmatched { rule: String, unmatched: String },
    #[error("Invalid rule: `{rule}`, bad pattern: {reason}")]
    Pattern { rule: String, reason: String },
}

/// A distinguished name no rule maps: none matched it (Kafka's
/// `NoMatchingRule`), or the rule that matched has a replacement Java
/// refuses when it is used, such as `$2` for a pattern with one group.
/// Either way Kafka fails the authentication.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct NoMatchingRule {
    pub distinguished_name: String,
    pub message: String,
}

/// Parsed `ssl.principal.mapping.rules`.
#[derive(Debug, Clone)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Pattern(PatternRule),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

#[derive(Debug, Clone)]
struct PatternRule {
    /// As written in the config, for messages.
    pattern: String,
    replacement: String,
    case: Case,
    /// The pattern anchored at both ends: does it match the whole name?
    whole: Regex,
    /// The pattern as is, for the replace-all pass.
    find: Regex,
    template: Template,
}

impl Default for SslPrincipalMapper {
    /// Kafka's default, `DEFAULT`: the principal is the subject as printed.
    fn default() -> Self {
        SslPrincipalMapper { rules: vec![Rule::Default] }
    }
}

impl SslPrincipalMapper {
    /// Parses the value of `ssl.principal.mapping.rules`.
    pub fn from_rules(rules: &str) -> Result<Self, InvalidRule> {
        let mut parsed = Vec::new();
        for text in split_rules(rules) {
            match parse_rule(&text)? {
                ParsedRule::Empty => {}
                ParsedRule::Default => parsed.push(Rule::Default),
                ParsedRule::Pattern { pattern, replacement, lower, upper } => {
                    let case = match (lower, upper) {
                        (true, _) => Case::Lower,
                        (_, true) => Case::Upper,
                        _ => Case::Keep,
                    };
                    parsed.push(Rule::Pattern(PatternRule::new(&text, pattern, replacement, case)?));
                }
            }
        }
        Ok(SslPrincipalMapper { rules: parsed })
    }

    /// The principal name for `distinguished_name`, from the first rule
    /// that matches it whole.
    pub fn name(&self, distinguished_name: &str) -> Result<String, NoMatchingRule> {
        for rule in &self.rules {
            let pattern_rule = match rule {
                Rule::Default => return Ok(distinguished_name.to_string()),
                Rule::Pattern(pattern_rule) => pattern_rule,
            };
            match pattern_rule.apply(distinguished_name) {
                None => continue,
                Some(Ok(name)) => return Ok(name),
                Some(Err(reason)) => {
                    return Err(NoMatchingRule {
                        distinguished_name: distinguished_name.to_string(),
                        message: format!("Rule {rule} cannot map {distinguished_name}: {reason}"),
                    })
                }
            }
        }
        Err(NoMatchingRule {
            distinguished_name: distinguished_name.to_string(),
            message: format!("No rules apply to {distinguished_name}, rules {}", RuleList(&self.rules)),
        })
    }
}

impl PatternRule {
    fn new(rule: &str, pattern: String, replacement: String, case: Case) -> Result<Self, InvalidRule> {
        let bad_pattern = |reason: String| InvalidRule::Pattern { rule: rule.to_string(), reason };
        let translated = java_regex::translate(&pattern).map_err(bad_pattern)?;
        let find = Regex::new(&translated).map_err(|e| bad_pattern(e.to_string()))?;
        let whole = Regex::new(&format!(r"\A(?:{translated})\z")).map_err(|e| bad_pattern(e.to_string()))?;
        let template = Template::new(&replacement, &find);
        Ok(PatternRule { pattern, replacement, case, whole, find, template })
    }

    /// None if the pattern does not match the whole name; otherwise what
    /// Java's `name.replaceAll(pattern, replacement)` gives, case-mapped
    /// with the English locale, or the reason Java throws instead.
    fn apply(&self, name: &str) -> Option<Result<String, String>> {
        if !self.whole.is_match(name) {
            return None;
        }
        let replaced = match self.template.replace_all(&self.find, name) {
            Ok(replaced) => replaced,
            Err(reason) => return Some(Err(reason)),
        };
        Some(Ok(match self.case {
            Case::Keep => replaced,
            Case::Lower => replaced.to_lowercase(),
            Case::Upper => replaced.to_uppercase(),
        }))
    }
}

/// Rules print as Kafka prints them in its messages: the closing `/` shows
/// only with a case flag.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Default => f.write_str("DEFAULT"),
            Rule::Pattern(rule) => {
                write!(f, "RULE:{}/{}", rule.pattern, rule.replacement)?;
                match rule.case {
                    Case::Keep => Ok(()),
                    Case::Lower => f.write_str("/L"),
                    Case::Upper => f.write_str("/U"),
                }
            }
        }
    }
}

struct RuleList<'a>(&'a [Rule]);

impl fmt::Display for RuleList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (index, rule) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{rule}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Display for SslPrincipalMapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SslPrincipalMapper(rules = {})", RuleList(&self.rules))
    }
}

#[cfg(test)]
mod tests;
