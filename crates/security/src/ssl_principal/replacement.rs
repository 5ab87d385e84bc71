//! A rule's replacement, applied as Kafka applies it: first Kafka rewrites
//! `$n` references to groups the pattern does not have into literal text,
//! then Java's `String.replaceAll` reads the result (`$n` and `${name}` for
//! groups, a backslash for a literal next character) at every match.
//!
//! Java works on UTF-16 units, and Kafka's rewrite inserts its backslashes
//! at positions counted in the text before any earlier insertion, so they
//! can land off target (even inside a surrogate pair). That is reproduced
//! by doing both steps on UTF-16 units. Java's errors in reading a
//! replacement depend only on the replacement and the pattern's groups,
//! so they are found once, up front, and reported when the rule matches.

use regex::{Captures, Regex};

const BACKSLASH: u16 = b'\\' as u16;
const DOLLAR: u16 = b'$' as u16;
const OPEN_BRACE: u16 = b'{' as u16;
const CLOSE_BRACE: u16 = b'}' as u16;

fn digit(unit: u16) -> Option<usize> {
    (u16::from(b'0')..=u16::from(b'9')).contains(&unit).then(|| usize::from(unit - u16::from(b'0')))
}

/// The replacement as literal text and group references, or the message
/// of the exception Java throws on its first use.
#[derive(Debug, Clone)]
pub(super) struct Template(Result<Vec<Piece>, String>);

#[derive(Debug, Clone)]
enum Piece {
    Literal(Vec<u16>),
    Group(usize),
}

impl Template {
    pub(super) fn new(replacement: &str, pattern: &Regex) -> Self {
        let groups = pattern.captures_len() - 1;
        let units: Vec<u16> = replacement.encode_utf16().collect();
        Template(escape_missing_groups(&units, groups).and_then(|escaped| read_pieces(&escaped, pattern)))
    }

    /// Java's `text.replaceAll(pattern, replacement)`: every match, left to
    /// right, replaced; after an empty match the search moves on one
    /// character (Java: one UTF-16 unit, which differs only before a
    /// character outside the BMP).
    pub(super) fn replace_all(&self, pattern: &Regex, text: &str) -> Result<String, String> {
        let pieces = self.0.as_ref().map_err(Clone::clone)?;
        let mut out: Vec<u16> = Vec::with_capacity(text.len());
        let mut copied = 0;
        let mut from = 0;
        while from <= text.len() {
            let Some(captures) = pattern.captures_at(text, from) else { break };
            let Some(found) = captures.get(0) else { break };
            out.extend(text[copied..found.start()].encode_utf16());
            expand(pieces, &captures, &mut out);
            copied = found.end();
            from = match (found.is_empty(), text[found.end()..].chars().next()) {
                (false, _) => found.end(),
                (true, Some(next)) => found.end() + next.len_utf8(),
                (true, None) => text.len() + 1,
            };
        }
        out.extend(text[copied..].encode_utf16());
        Ok(String::from_utf16_lossy(&out))
    }
}

fn expand(pieces: &[Piece], captures: &Captures<'_>, out: &mut Vec<u16>) {
    for piece in pieces {
        match piece {
            Piece::Literal(units) => out.extend_from_slice(units),
            Piece::Group(index) => {
                if let Some(group) = captures.get(*index) {
                    out.extend(group.as_str().encode_utf16());
                }
            }
        }
    }
}

/// Kafka's rewrite (when the pattern has groups): each `$digits` whose
/// number, with trailing digits dropped until it is below 10 or names a
/// group, still names no group gets a backslash before its `$`, making it
/// literal. `$0...` is left alone. Positions come from the original text
/// but the backslash goes into the text as rewritten so far, as in Kafka.
fn escape_missing_groups(replacement: &[u16], groups: usize) -> Result<Vec<u16>, String> {
    if groups == 0 {
        return Ok(replacement.to_vec());
    }
    let mut rewritten = replacement.to_vec();
    let mut at = 0;
    while at + 1 < replacement.len() {
        if replacement[at] != DOLLAR || digit(replacement[at + 1]).is_none() {
            at += 1;
            continue;
        }
        let digits_start = at + 1;
        let digits_end = (digits_start..replacement.len()).find(|&i| digit(replacement[i]).is_none());
        let digits = &replacement[digits_start..digits_end.unwrap_or(replacement.len())];
        at = digits_start + digits.len();
        if digits[0] == u16::from(b'0') {
            continue;
        }
        let mut number = java_int(digits)?;
        while number > groups && number >= 10 {
            number /= 10;
        }
        if number > groups {
            rewritten.insert(digits_start - 1, BACKSLASH);
        }
    }
    Ok(rewritten)
}

/// ASCII digits as Java's `Integer.parseInt` reads them, which refuses
/// values beyond `i32::MAX`.
fn java_int(digits: &[u16]) -> Result<usize, String> {
    let mut value: u64 = 0;
    for &unit in digits {
        value = value * 10 + digit(unit).unwrap_or(0) as u64;
        if value > i32::MAX as u64 {
            return Err(format!("For input string: \"{}\"", String::from_utf16_lossy(digits)));
        }
    }
    Ok(value as usize)
}

/// Java's reading of a replacement string, with its exception messages.
fn read_pieces(replacement: &[u16], pattern: &Regex) -> Result<Vec<Piece>, String> {
    let groups = pattern.captures_len() - 1;
    let mut pieces = Vec::new();
    let mut literal = Vec::new();
    let mut at = 0;
    while let Some(&unit) = replacement.get(at) {
        at += 1;
        if unit == BACKSLASH {
            let escaped = replacement.get(at).ok_or("character to be escaped is missing")?;
            literal.push(*escaped);
            at += 1;
            continue;
        }
        if unit != DOLLAR {
            literal.push(unit);
            continue;
        }
        let next = *replacement.get(at).ok_or("Illegal group reference: group index is missing")?;
        let group = if next == OPEN_BRACE {
            named_group(replacement, &mut at, pattern)?
        } else {
            numbered_group(replacement, &mut at, groups)?
        };
        if !literal.is_empty() {
            pieces.push(Piece::Literal(std::mem::take(&mut literal)));
        }
        pieces.push(Piece::Group(group));
    }
    if !literal.is_empty() {
        pieces.push(Piece::Literal(literal));
    }
    Ok(pieces)
}

/// `${name}` with `at` on the brace: ASCII letters and digits, not
/// starting with a digit, naming a group of the pattern.
fn named_group(replacement: &[u16], at: &mut usize, pattern: &Regex) -> Result<usize, String> {
    *at += 1;
    let start = *at;
    while replacement.get(*at).is_some_and(|&unit| unit < 0x80 && (unit as u8).is_ascii_alphanumeric()) {
        *at += 1;
    }
    let name = String::from_utf16_lossy(&replacement[start..*at]);
    if name.is_empty() {
        return Err("named capturing group has 0 length name".into());
    }
    if replacement.get(*at) != Some(&CLOSE_BRACE) {
        return Err("named capturing group is missing trailing '}'".into());
    }
    *at += 1;
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("capturing group name {{{name}}} starts with digit character"));
    }
    pattern
        .capture_names()
        .position(|group| group == Some(name.as_str()))
        .ok_or_else(|| format!("No group with name {{{name}}}"))
}

/// `$digits` with `at` on the first digit: that digit, then as many more
/// as keep the number a group of the pattern.
fn numbered_group(replacement: &[u16], at: &mut usize, groups: usize) -> Result<usize, String> {
    let mut number = replacement.get(*at).and_then(|&unit| digit(unit)).ok_or("Illegal group reference")?;
    *at += 1;
    while let Some(next) = replacement.get(*at).and_then(|&unit| digit(unit)) {
        let longer = number * 10 + next;
        if longer > groups {
            break;
        }
        number = longer;
        *at += 1;
    }
    if number > groups {
        return Err(format!("No group {number}"));
    }
    Ok(number)
}
