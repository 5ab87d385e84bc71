//! Splitting the rules text into rules and reading each one, as Kafka's
//! regular expressions do it. Kafka finds, left to right, each place where
//! optional whitespace, a rule, optional whitespace, and then a comma (with
//! any whitespace after it) or the end of the text follow each other; a
//! rule there is the first that fits of `DEFAULT`, `RULE:p/r/` plus
//! anything up to the separator, or the shortest run of anything (not
//! crossing a line break) up to a separator. Text where no such place
//! starts is skipped, which is how, for example, a line break can make
//! Kafka drop part of the list silently. The same is done here.
//!
//! Positions are counted in characters; the splitter's Java counterpart
//! counts UTF-16 units, which only matters where it steps one unit past an
//! empty match, and those happen only next to a line break or at the end.

use super::InvalidRule;

const DEFAULT: &str = "DEFAULT";
const RULE_PREFIX: &str = "RULE:";

/// One rule as read: text that is no rule at all is refused, and the empty
/// text between two commas is no rule but fine.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ParsedRule {
    Empty,
    Default,
    Pattern { pattern: String, replacement: String, lower: bool, upper: bool },
}

/// Java's `\s` (ASCII whitespace only).
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r')
}

/// What Java's `.` does not match (without DOTALL) and `$` may stand before.
fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// The rules text split as Kafka splits it, empty rules included.
pub(super) fn split_rules(text: &str) -> Vec<String> {
    // Java's String.trim drops every character up to U+0020 at both ends.
    let chars: Vec<char> = text.trim_matches(|c: char| c <= ' ').chars().collect();
    let mut rules = Vec::new();
    let mut from = 0;
    while from <= chars.len() {
        let Some(found) = (from..=chars.len()).find_map(|start| rule_at(&chars, start)) else {
            break;
        };
        rules.push(chars[found.rule_start..found.rule_end].iter().collect());
        // After an empty match the next search starts one further on.
        from = if found.end == found.start { found.end + 1 } else { found.end };
    }
    rules
}

struct Found {
    start: usize,
    rule_start: usize,
    rule_end: usize,
    end: usize,
}

/// The separator-terminated rule starting exactly at `start`, if any.
/// Backing off the leading whitespace never helps a rule fit (what it
/// would start with is whitespace, which only the last, shortest-run form
/// could take, and that form already failed on the same separators).
fn rule_at(chars: &[char], start: usize) -> Option<Found> {
    let rule_start = skip_spaces(chars, start);
    let (rule_end, end) = default_at(chars, rule_start)
        .or_else(|| pattern_rule_at(chars, rule_start))
        .or_else(|| shortest_rule_at(chars, rule_start))?;
    Some(Found { start, rule_start, rule_end, end })
}

fn skip_spaces(chars: &[char], mut at: usize) -> usize {
    while chars.get(at).copied().is_some_and(is_space) {
        at += 1;
    }
    at
}

/// Where a separator starting at `at` ends: whitespace, then a comma and
/// whitespace, or the end (also just before a final line terminator, as
/// Java's `$` allows).
fn separator_end(chars: &[char], at: usize) -> Option<usize> {
    let after_spaces = skip_spaces(chars, at);
    match chars.get(after_spaces) {
        Some(',') => Some(skip_spaces(chars, after_spaces + 1)),
        None => Some(after_spaces),
        Some(&c) if after_spaces + 1 == chars.len() && is_line_terminator(c) => Some(after_spaces),
        Some(_) => None,
    }
}

fn has_prefix(chars: &[char], at: usize, prefix: &str) -> bool {
    (at..).zip(prefix.chars()).all(|(position, expected)| chars.get(position) == Some(&expected))
}

/// `DEFAULT` followed directly by a separator.
fn default_at(chars: &[char], at: usize) -> Option<(usize, usize)> {
    if !has_prefix(chars, at, DEFAULT) {
        return None;
    }
    let rule_end = at + DEFAULT.len();
    Some((rule_end, separator_end(chars, rule_end)?))
}

/// `RULE:pattern/replacement/`, an optional case flag, then the shortest
/// run of anything up to a separator (which the rule keeps, for the
/// parser to refuse).
fn pattern_rule_at(chars: &[char], at: usize) -> Option<(usize, usize)> {
    let (_, _, mut after) = pattern_rule_parts(chars, at)?;
    if matches!(chars.get(after), Some('L' | 'U')) {
        after += 1;
    }
    shortest_rule_at(chars, after)
}

/// The shortest run from `at` that a separator follows, without crossing
/// a line terminator: (end of run, end of separator).
fn shortest_rule_at(chars: &[char], at: usize) -> Option<(usize, usize)> {
    let mut end = at;
    loop {
        if let Some(separator) = separator_end(chars, end) {
            return Some((end, separator));
        }
        match chars.get(end) {
            Some(&c) if !is_line_terminator(c) => end += 1,
            _ => return None,
        }
    }
}

/// After `RULE:` at `at`: the pattern and replacement ranges and the
/// position after the closing slash.
fn pattern_rule_parts(chars: &[char], at: usize) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>, usize)> {
    if !has_prefix(chars, at, RULE_PREFIX) {
        return None;
    }
    let pattern_start = at + RULE_PREFIX.len();
    let pattern_end = part_end(chars, pattern_start)?;
    let replacement_end = part_end(chars, pattern_end + 1)?;
    Some((pattern_start..pattern_end, pattern_end + 1..replacement_end, replacement_end + 1))
}

/// The position of the slash ending a pattern or replacement that starts
/// at `at`. A backslash takes the next character with it (but not a line
/// terminator: then, like a missing slash, the rule is not of this form).
fn part_end(chars: &[char], mut at: usize) -> Option<usize> {
    loop {
        match chars.get(at)? {
            '/' => return Some(at),
            '\\' => match chars.get(at + 1) {
                Some(&next) if !is_line_terminator(next) => at += 2,
                _ => return None,
            },
            _ => at += 1,
        }
    }
}

/// Reads one rule as split off: it must be, whole, `DEFAULT`,
/// `RULE:pattern/replacement/` with an optional `L` or `U`, or empty.
pub(super) fn parse_rule(rule: &str) -> Result<ParsedRule, InvalidRule> {
    let chars: Vec<char> = rule.chars().collect();
    let (parsed, end) = if has_prefix(&chars, 0, DEFAULT) {
        (ParsedRule::Default, DEFAULT.len())
    } else if let Some((pattern, replacement, mut end)) = pattern_rule_parts(&chars, 0) {
        let flag = chars.get(end).copied();
        let (lower, upper) = (flag == Some('L'), flag == Some('U'));
        if lower || upper {
            end += 1;
        }
        let pattern = chars[pattern].iter().collect();
        let replacement = chars[replacement].iter().collect();
        (ParsedRule::Pattern { pattern, replacement, lower, upper }, end)
    } else {
        (ParsedRule::Empty, 0)
    };
    if end != chars.len() {
        return Err(InvalidRule::Unmatched { rule: rule.to_string(), unmatched: chars[end..].iter().collect() });
    }
    Ok(parsed)
}
