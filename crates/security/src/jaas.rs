//! JAAS configuration text as Kafka's `sasl.jaas.config` values hold it, e.g.
//! `org.apache.kafka.common.security.plain.PlainLoginModule required
//! username="admin" password="admin-secret" user_admin="admin-secret";`
//!
//! Parsed as Kafka's `JaasConfig` does, which reads the text with Java's
//! `StreamTokenizer` (comments `//` and `/* */`, quotes `"` and `'`, numbers
//! are not values), so that a text Kafka accepts means the same here.

use std::collections::BTreeMap;

use thiserror::Error;

/// The login module whose `user_<name>` options are PLAIN's users.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
/// The SCRAM login module (its options are the client's username/password).
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

const USER_PREFIX: &str = "user_";

/// One login module entry: `<module> <flag> [key=value]... ;`.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    /// `required`, `requisite`, `sufficient` or `optional`, lower case.
    pub control_flag: String,
    pub options: BTreeMap<String, String>,
}

/// Options hold passwords: Debug shows their names only.
impl std::fmt::Debug for JaasEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JaasEntry")
            .field("login_module", &self.login_module)
            .field("control_flag", &self.control_flag)
            .field("option_names", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Malformed JAAS text, with Kafka's message where Kafka has one.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct JaasError(pub String);

/// Parses every entry in `text`; at least one must be there.
pub fn parse(text: &str) -> Result<Vec<JaasEntry>, JaasError> {
    let mut tokenizer = Tokenizer::new(text);
    let mut entries = Vec::new();
    loop {
        let token = tokenizer.next_token();
        if token == Token::Eof {
            break;
        }
        entries.push(parse_entry(token, &mut tokenizer)?);
    }
    if entries.is_empty() {
        return Err(JaasError("Login module not specified in JAAS config".into()));
    }
    Ok(entries)
}

/// Parses a `sasl.jaas.config` value, which Kafka requires to hold exactly
/// one entry (`JaasContext.loadServerContext`).
pub fn parse_single(text: &str) -> Result<JaasEntry, JaasError> {
    let mut entries = parse(text)?;
    if entries.len() != 1 {
        return Err(JaasError(format!(
            "JAAS config property contains {} login modules, should be 1 module",
            entries.len()
        )));
    }
    entries.pop().ok_or_else(|| JaasError("JAAS config property does not contain any login modules".into()))
}

/// PLAIN's users: the `user_<name>` options, by name.
pub fn plain_users(entry: &JaasEntry) -> BTreeMap<String, String> {
    entry
        .options
        .iter()
        .filter_map(|(key, value)| key.strip_prefix(USER_PREFIX).map(|name| (name.to_string(), value.clone())))
        .collect()
}

/// PLAIN's users over several entries as Kafka's `PlainServerCallbackHandler`
/// looks them up: only PlainLoginModule entries, the first entry naming a
/// user wins.
pub fn plain_users_of(entries: &[JaasEntry]) -> BTreeMap<String, String> {
    let mut users = BTreeMap::new();
    for entry in entries.iter().filter(|entry| entry.login_module == PLAIN_LOGIN_MODULE) {
        for (name, password) in plain_users(entry) {
            users.entry(name).or_insert(password);
        }
    }
    users
}

/// One entry, its first token (the module name) already read.
fn parse_entry(first: Token, tokenizer: &mut Tokenizer) -> Result<JaasEntry, JaasError> {
    let login_module = first.text().map(str::to_string);
    let flag_token = tokenizer.next_token();
    if flag_token == Token::Eof {
        return Err(JaasError("Login module control flag not specified in JAAS config".into()));
    }
    let control_flag = control_flag(flag_token.text())?;
    let mut options = BTreeMap::new();
    let terminator = loop {
        let token = tokenizer.next_token();
        if token == Token::Eof || token == Token::Char(';') {
            break token;
        }
        let (key, value) = parse_option(token, tokenizer)?;
        options.insert(key, value);
    };
    if terminator != Token::Char(';') {
        return Err(JaasError("JAAS config entry not terminated by semi-colon".into()));
    }
    // Kafka learns of a missing module name only when it builds the entry.
    let login_module = login_module
        .filter(|name| !name.is_empty())
        .ok_or_else(|| JaasError("Login module name not specified in JAAS config".into()))?;
    Ok(JaasEntry { login_module, control_flag, options })
}

/// `key=value`, the key's token already read. Values are words or quoted
/// strings; a number is no value (Kafka: quote it).
fn parse_option(key_token: Token, tokenizer: &mut Tokenizer) -> Result<(String, String), JaasError> {
    let key = key_token.text().map(str::to_string);
    let missing_value =
        || JaasError(format!("Value not specified for key '{}' in JAAS config", key.as_deref().unwrap_or("null")));
    if tokenizer.next_token() != Token::Char('=') {
        return Err(missing_value());
    }
    let value = tokenizer.next_token().text().map(str::to_string).ok_or_else(missing_value)?;
    // Kafka would store a number or symbol key as null; refuse it instead.
    let key = key.ok_or_else(|| JaasError("Option name not specified in JAAS config".into()))?;
    Ok((key, value))
}

fn control_flag(flag: Option<&str>) -> Result<String, JaasError> {
    let flag = flag.ok_or_else(|| JaasError("Login module control flag is not available in the JAAS config".into()))?;
    match flag.to_uppercase().as_str() {
        "REQUIRED" => Ok("required".into()),
        "REQUISITE" => Ok("requisite".into()),
        "SUFFICIENT" => Ok("sufficient".into()),
        "OPTIONAL" => Ok("optional".into()),
        _ => Err(JaasError(format!("Invalid login module control flag '{flag}' in JAAS config"))),
    }
}

/// A token as Java's `StreamTokenizer` yields it.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Eof,
    Word(String),
    Quoted(String),
    /// A number: it has no text (`sval` is null in Java).
    Number,
    /// Any other single character, such as `=` or `;`.
    Char(char),
}

impl Token {
    /// Java's `sval`: set for words and quoted strings only.
    fn text(&self) -> Option<&str> {
        match self {
            Token::Word(text) | Token::Quoted(text) => Some(text),
            _ => None,
        }
    }
}

/// Java's `StreamTokenizer` as Kafka configures it: the default syntax
/// (letters and `\u{a0}`-`\u{ff}` are word characters, `0`-`9` `.` `-` make
/// numbers, `/` starts a line comment, `"` and `'` quote) plus `-`, `_` and
/// `$` as word characters and both C and C++ comments.
struct Tokenizer {
    chars: Vec<char>,
    position: usize,
}

impl Tokenizer {
    fn new(text: &str) -> Self {
        Self { chars: text.chars().collect(), position: 0 }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.position).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek();
        if c.is_some() {
            self.position += 1;
        }
        c
    }

    fn next_token(&mut self) -> Token {
        loop {
            while self.peek().is_some_and(is_whitespace) {
                self.position += 1;
            }
            let Some(c) = self.bump() else { return Token::Eof };
            if is_numeric(c) {
                return self.number(c);
            }
            if is_word(c) {
                return self.word(c);
            }
            if c == '"' || c == '\'' {
                return Token::Quoted(self.quoted(c));
            }
            if c == '/' {
                if self.skip_comment() {
                    continue;
                }
                return Token::Eof;
            }
            return Token::Char(c);
        }
    }

    /// A number, or a lone `-` (Java returns `-` as an ordinary character
    /// when no digit or `.` follows it).
    fn number(&mut self, first: char) -> Token {
        if first == '-' && !self.peek().is_some_and(|c| c == '.' || c.is_ascii_digit()) {
            return Token::Char('-');
        }
        let mut seen_dot = first == '.';
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() || (c == '.' && !seen_dot) {
                seen_dot |= c == '.';
                self.position += 1;
            } else {
                break;
            }
        }
        Token::Number
    }

    fn word(&mut self, first: char) -> Token {
        let mut word = String::from(first);
        while let Some(c) = self.peek().filter(|&c| is_word(c) || is_numeric(c)) {
            word.push(c);
            self.position += 1;
        }
        Token::Word(word)
    }

    /// A quoted string after its opening `quote`. As in Java it ends at the
    /// closing quote, a line end (kept for the next token) or the end of
    /// text, and knows C escapes.
    fn quoted(&mut self, quote: char) -> String {
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if c == '\n' || c == '\r' {
                break;
            }
            self.position += 1;
            if c == quote {
                break;
            }
            if c == '\\' {
                if let Some(escaped) = self.escape() {
                    text.push(escaped);
                }
            } else {
                text.push(c);
            }
        }
        text
    }

    /// The character an escape after `\` stands for: `\a \b \f \n \r \t \v`,
    /// octal up to `\377`, otherwise the character itself.
    fn escape(&mut self) -> Option<char> {
        let c = self.bump()?;
        if let Some(first_digit) = c.to_digit(8) {
            let mut value = first_digit;
            let max_digits = if first_digit <= 3 { 3 } else { 2 };
            for _ in 1..max_digits {
                match self.peek().and_then(|d| d.to_digit(8)) {
                    Some(digit) => {
                        value = value * 8 + digit;
                        self.position += 1;
                    }
                    None => break,
                }
            }
            return char::from_u32(value);
        }
        Some(match c {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            other => other,
        })
    }

    /// Skips a comment after `/`: `/* ... */`, `// ...` or, `/` being a
    /// comment character, `/ ...` to the line end. As in Java, the character
    /// after a lone `/` belongs to the comment even if it ends the line.
    /// False when the text ends inside a `/* */` comment (Java then returns
    /// end of text).
    fn skip_comment(&mut self) -> bool {
        if self.bump() == Some('*') {
            let mut previous = '\0';
            loop {
                match self.bump() {
                    None => return false,
                    Some('/') if previous == '*' => return true,
                    Some(c) => previous = c,
                }
            }
        }
        while self.peek().is_some_and(|c| c != '\n' && c != '\r') {
            self.position += 1;
        }
        true
    }
}

fn is_whitespace(c: char) -> bool {
    c <= ' '
}

fn is_numeric(c: char) -> bool {
    c.is_ascii_digit() || c == '.' || c == '-'
}

/// Word characters; `-` is one too but a token starting with it is read as
/// a number first, as in Java.
fn is_word(c: char) -> bool {
    c.is_ascii_alphabetic() || ('\u{a0}'..='\u{ff}').contains(&c) || c > '\u{ff}' || matches!(c, '-' | '_' | '$')
}

#[cfg(test)]
mod tests;
