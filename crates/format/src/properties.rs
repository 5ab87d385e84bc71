//! A reader for Java `.properties` files as Kafka's configs use them:
//! `key=value` or `key: value` or `key value`, `#`/`!` comments, `\` line
//! continuations and the common escapes. Later keys override earlier ones.

use std::collections::BTreeMap;

/// Parses properties text into an ordered map.
pub fn parse(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut logical = String::new();
    for raw in text.lines() {
        let line = raw.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        // An odd number of trailing backslashes continues the line.
        let trailing = line.chars().rev().take_while(|&c| c == '\\').count();
        if trailing % 2 == 1 {
            logical.push_str(&line[..line.len() - 1]);
            continue;
        }
        logical.push_str(line);
        let (key, value) = split_entry(&logical);
        out.insert(unescape(key), unescape(value.trim_start()));
        logical.clear();
    }
    if !logical.is_empty() {
        let (key, value) = split_entry(&logical);
        out.insert(unescape(key), unescape(value.trim_start()));
    }
    out
}

fn split_entry(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => return (&line[..i], &line[i + 1..]),
            ' ' | '\t' => {
                let rest = line[i..].trim_start();
                let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
                return (&line[..i], rest);
            }
            _ => {}
        }
    }
    (line, "")
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                if let Some(decoded) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(decoded);
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// Writes properties the way `java.util.Properties.store` does for the
/// simple values Kafka keeps in `meta.properties`.
pub fn render(header_comment: &str, entries: &[(&str, String)]) -> String {
    let mut out = format!("#\n#{header_comment}\n");
    for (key, value) in entries {
        out.push_str(key);
        out.push('=');
        out.push_str(value);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_style_config() {
        let text = "# comment\n! also\nnode.id=1\nlisteners = PLAINTEXT://:9092\nlog.dirs: /a,\\\n   /b\nprocess.roles broker,controller\nempty=\n";
        let map = parse(text);
        assert_eq!(map["node.id"], "1");
        assert_eq!(map["listeners"], "PLAINTEXT://:9092");
        assert_eq!(map["log.dirs"], "/a,/b");
        assert_eq!(map["process.roles"], "broker,controller");
        assert_eq!(map["empty"], "");
        assert_eq!(map.len(), 5);
    }

    #[test]
    fn escapes() {
        let map = parse("a\\=b=c\\td\nu=\\u0041\n");
        assert_eq!(map["a=b"], "c\td");
        assert_eq!(map["u"], "A");
    }
}
