//! Java regular expressions rewritten for the `regex` crate where the same
//! text means different things to the two, so that a rule written for
//! Kafka matches the same names here:
//!
//! - `\d \w \s` (and `\D \W \S`) and the POSIX `\p{Alpha}`-style names
//!   are ASCII-only in Java, Unicode in the crate; `\v` is vertical
//!   whitespace in Java, a vertical tab in the crate: all become explicit
//!   classes. So do `\h`, and `\e`, `\cX` and `\0oct` literals, which the
//!   crate lacks.
//! - Java's `.` stops at `\n`, `\r`, U+0085, U+2028 and U+2029 (only `\n`
//!   with the `d` flag, nothing with `s`): it becomes a class saying so,
//!   following the flags through the groups they apply to. `^` and `$` in
//!   multi-line mode get the crate's CRLF mode, which also counts `\r`.
//! - A backslash before a character that is not a letter or digit makes it
//!   literal in Java, but `\<` and `\>` are word boundaries in the crate:
//!   such escapes become `\x{..}` literals. `\Q...\E` quoting likewise.
//! - Java's `U` flag (Unicode classes) is the crate's swap-greed flag, so
//!   it is refused rather than misread; `u` (Unicode case folding) is
//!   dropped, the crate folds case by Unicode anyway.
//! - A quantifier on a quantifier (`a**`, `a*?+`) is an error in Java but
//!   a nested repetition in the crate, and Java's possessive `a*+` would be
//!   read as `(a*)+`: both are refused.
//!
//! Everything else is passed on, and what the crate does not support makes
//! the rule invalid. Known differences left: Java's `$` outside multi-line
//! mode also matches before a final line terminator; in `x` mode only
//! comments outside classes are understood (and dropped); case-insensitive
//! matching folds only ASCII in Java unless `u` is given.

use std::fmt::Write as _;
use std::iter::Peekable;
use std::str::Chars;

/// The crate's text for the Java pattern `java`, or why it cannot be one.
pub(super) fn translate(java: &str) -> Result<String, String> {
    let mut translator = Translator {
        chars: java.chars().peekable(),
        out: String::from("(?R)"),
        class_depth: 0,
        after: After::Atom,
        scopes: vec![LineFlags::default()],
    };
    while let Some(c) = translator.chars.next() {
        translator.step(c)?;
    }
    Ok(translator.out)
}

/// What the last piece of pattern outside a class was, as far as a
/// following quantifier cares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum After {
    Atom,
    Quantifier,
    /// A quantifier with its lazy `?`.
    LazyQuantifier,
    /// Inline flags `(?i)`, which Java does not let a quantifier follow.
    Flags,
}

/// The flags the rewriting follows, for one group: what `.` matches, and
/// whether `#` starts a comment (and whitespace is no atom).
#[derive(Clone, Copy, Default)]
struct LineFlags {
    dot_all: bool,
    unix_lines: bool,
    comments: bool,
}

struct Translator<'a> {
    chars: Peekable<Chars<'a>>,
    out: String,
    class_depth: usize,
    after: After,
    /// One entry per open group, innermost last.
    scopes: Vec<LineFlags>,
}

impl Translator<'_> {
    fn step(&mut self, c: char) -> Result<(), String> {
        if self.class_depth == 0 && matches!(c, '*' | '+' | '?' | '{') {
            return self.quantifier(c);
        }
        if self.class_depth == 0 && self.flags().comments {
            if c == '#' {
                // Dropped, so that the anchoring wrapped around the
                // pattern cannot end up inside the comment.
                self.chars.by_ref().find(|&c| c == '\n');
                return Ok(());
            }
            if matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r') {
                self.out.push(c);
                return Ok(());
            }
        }
        self.after = After::Atom;
        match c {
            '\\' => self.escape(),
            '[' => self.open_class(),
            ']' if self.class_depth > 0 => {
                self.class_depth -= 1;
                self.out.push(']');
            }
            _ if self.class_depth > 0 => self.out.push(c),
            '.' => {
                let flags = self.flags();
                self.out.push_str(match (flags.dot_all, flags.unix_lines) {
                    (true, _) => "(?s:.)",
                    (false, true) => r"[^\n]",
                    (false, false) => r"[^\n\r\x{85}\x{2028}\x{2029}]",
                });
            }
            '(' if self.chars.next_if_eq(&'?').is_some() => return self.group_start(),
            '(' => {
                self.scopes.push(self.flags());
                self.out.push('(');
            }
            ')' => {
                if self.scopes.len() > 1 {
                    self.scopes.pop();
                }
                self.out.push(')');
            }
            _ => self.out.push(c),
        }
        Ok(())
    }

    fn flags(&self) -> LineFlags {
        self.scopes.last().copied().unwrap_or_default()
    }

    /// A quantifier character outside a class; `{` runs to its `}` (in
    /// Java a `{` there always starts a counted repetition).
    fn quantifier(&mut self, c: char) -> Result<(), String> {
        self.after = match (c, self.after) {
            ('{', _) => {
                self.out.push('{');
                for counted in self.chars.by_ref() {
                    self.out.push(counted);
                    if counted == '}' {
                        break;
                    }
                }
                After::Quantifier
            }
            ('?', After::Quantifier) => {
                self.out.push('?');
                After::LazyQuantifier
            }
            ('+', After::Quantifier) => return Err("possessive quantifiers are not supported".into()),
            (_, After::Quantifier | After::LazyQuantifier | After::Flags) => {
                return Err(format!("dangling meta character '{c}'"));
            }
            _ => {
                self.out.push(c);
                After::Quantifier
            }
        };
        Ok(())
    }

    fn open_class(&mut self) {
        self.class_depth += 1;
        self.out.push('[');
        if self.chars.next_if_eq(&'^').is_some() {
            self.out.push('^');
        }
        // The crate reads a `]` right after the opening as literal.
        if self.chars.next_if_eq(&']').is_some() {
            self.out.push(']');
        }
    }

    fn push_literal(&mut self, c: char) {
        let _ = write!(self.out, "\\x{{{:x}}}", u32::from(c));
    }

    /// After a backslash.
    fn escape(&mut self) {
        let Some(c) = self.chars.next() else {
            // Let the crate refuse the dangling backslash.
            self.out.push('\\');
            return;
        };
        if let Some(contents) = class_escape(c.to_ascii_lowercase()) {
            self.push_class(contents, c.is_ascii_uppercase());
            return;
        }
        match c {
            'Q' => {
                while let Some(quoted) = self.chars.next() {
                    if quoted == '\\' && self.chars.next_if_eq(&'E').is_some() {
                        break;
                    }
                    self.push_literal(quoted);
                }
            }
            'p' | 'P' if self.chars.peek() == Some(&'{') => self.property(c == 'P'),
            'e' => self.push_literal('\u{1b}'),
            'c' => match self.chars.next() {
                Some(control) => self.push_literal(char::from_u32(u32::from(control) ^ 0x40).unwrap_or(control)),
                None => self.out.push_str("\\c"),
            },
            '0' => self.octal(),
            _ if c.is_ascii_alphanumeric() => {
                self.out.push('\\');
                self.out.push(c);
                // `\x{..}`, `\N{..}`, `\b{..}`: the braces belong to the escape.
                if self.chars.peek() == Some(&'{') {
                    self.copy_braced();
                }
            }
            _ => self.push_literal(c),
        }
    }

    fn push_class(&mut self, contents: &str, negated: bool) {
        // A class inside a class is a union in both dialects.
        let _ = write!(self.out, "[{}{contents}]", if negated { "^" } else { "" });
    }

    fn copy_braced(&mut self) {
        for c in self.chars.by_ref() {
            self.out.push(c);
            if c == '}' {
                break;
            }
        }
    }

    /// `\p{..}` / `\P{..}`: Java's POSIX names are ASCII classes, other
    /// names (categories, scripts) are passed on.
    fn property(&mut self, negated: bool) {
        let mut name = String::new();
        self.chars.next();
        while let Some(c) = self.chars.next_if(|c| *c != '}') {
            name.push(c);
        }
        let closed = self.chars.next_if_eq(&'}').is_some();
        match posix_class(&name) {
            Some(contents) if closed => self.push_class(contents, negated),
            _ => {
                let _ =
                    write!(self.out, "\\{}{{{name}{}", if negated { 'P' } else { 'p' }, if closed { "}" } else { "" });
            }
        }
    }

    /// `\0` and one to three octal digits (three only up to `\0377`).
    fn octal(&mut self) {
        if !self.chars.peek().is_some_and(|c| c.is_digit(8)) {
            // Java refuses `\0` alone; so does the crate.
            self.out.push_str("\\0");
            return;
        }
        let mut value = 0u32;
        for index in 0..3 {
            let Some(digit) = self.chars.peek().and_then(|c| c.to_digit(8)) else { break };
            if index == 2 && value > 0o37 {
                break;
            }
            value = value * 8 + digit;
            self.chars.next();
        }
        self.push_literal(char::from_u32(value).unwrap_or('\0'));
    }

    /// After `(?`: inline flags `(?flags)` / `(?flags:` are mapped, any
    /// other group kind is passed on.
    fn group_start(&mut self) -> Result<(), String> {
        let mut flags = String::new();
        while let Some(c) = self.chars.next_if(|c| c.is_ascii_alphabetic() || *c == '-') {
            flags.push(c);
        }
        let terminator = match self.chars.peek() {
            Some(&c @ (')' | ':')) if !flags.is_empty() => c,
            _ => {
                self.scopes.push(self.flags());
                self.out.push_str("(?");
                self.out.push_str(&flags);
                return Ok(());
            }
        };
        self.chars.next();
        let mut line_flags = self.flags();
        let crate_flags = map_flags(&flags, &mut line_flags)?;
        match (crate_flags.is_empty(), terminator) {
            (true, ')') => {}
            (true, _) => self.out.push_str("(?:"),
            (false, _) => {
                let _ = write!(self.out, "(?{crate_flags}{terminator}");
            }
        }
        if terminator == ')' {
            // Flags alone: they hold to the end of the enclosing group.
            if let Some(scope) = self.scopes.last_mut() {
                *scope = line_flags;
            }
            self.after = After::Flags;
        } else {
            self.scopes.push(line_flags);
        }
        Ok(())
    }
}

/// The class contents of Java's class escapes `\d \w \s \h \v` (the
/// upper-case letters negate them).
fn class_escape(letter: char) -> Option<&'static str> {
    match letter {
        'd' => Some("0-9"),
        'w' => Some("0-9A-Za-z_"),
        's' => Some(r"\t\n\x0B\x0C\r\x20"),
        'h' => Some(r"\t\x20\xA0\x{1680}\x{180E}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}"),
        'v' => Some(r"\n\x0B\x0C\r\x{85}\x{2028}\x{2029}"),
        _ => None,
    }
}

/// Java's POSIX property names, which are ASCII-only classes.
fn posix_class(name: &str) -> Option<&'static str> {
    Some(match name {
        "Lower" => "a-z",
        "Upper" => "A-Z",
        "ASCII" => r"\x00-\x7F",
        "Alpha" => "A-Za-z",
        "Digit" => "0-9",
        "Alnum" => "0-9A-Za-z",
        "Punct" => r"\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E",
        "Graph" => r"\x21-\x7E",
        "Print" => r"\x20-\x7E",
        "Blank" => r"\t\x20",
        "Cntrl" => r"\x00-\x1F\x7F",
        "XDigit" => "0-9A-Fa-f",
        "Space" => r"\t\n\x0B\x0C\r\x20",
        _ => return None,
    })
}

/// Java inline flags (`on-off`) as the crate's, updating `line`: `s` and
/// `d` go to the rewriting of `.` (every `.` is rewritten, so the crate
/// never needs `s`), and `d` also turns the crate's CRLF mode off.
fn map_flags(flags: &str, line: &mut LineFlags) -> Result<String, String> {
    let (mut on, mut off) = (String::new(), String::new());
    let mut negating = false;
    for flag in flags.chars() {
        let (same, opposite) = if negating { (&mut off, &mut on) } else { (&mut on, &mut off) };
        match flag {
            '-' => negating = true,
            's' => line.dot_all = !negating,
            'x' => {
                line.comments = !negating;
                same.push('x');
            }
            'd' => {
                line.unix_lines = !negating;
                opposite.push('R');
            }
            'i' | 'm' => same.push(flag),
            'u' => {}
            _ => return Err(format!("unsupported inline flag `{flag}` in (?{flags})")),
        }
    }
    if !off.is_empty() {
        on.push('-');
        on.push_str(&off);
    }
    Ok(on)
}
