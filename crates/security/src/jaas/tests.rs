use super::*;

fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn error(text: &str) -> String {
    match parse(text) {
        Ok(entries) => panic!("{text:?} parsed as {entries:?}"),
        Err(JaasError(message)) => message,
    }
}

#[test]
fn parses_kafkas_plain_example() {
    let text = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin"
        password="admin-secret"
        user_admin="admin-secret"
        user_alice="alice-secret";"#;
    let entry = parse_single(text).expect("valid");
    assert_eq!(entry.login_module, PLAIN_LOGIN_MODULE);
    assert_eq!(entry.control_flag, "required");
    assert_eq!(
        entry.options,
        options(&[
            ("username", "admin"),
            ("password", "admin-secret"),
            ("user_admin", "admin-secret"),
            ("user_alice", "alice-secret"),
        ])
    );
    assert_eq!(plain_users(&entry), options(&[("admin", "admin-secret"), ("alice", "alice-secret")]));
}

#[test]
fn quoted_values_keep_spaces_equals_semicolons_and_escapes() {
    let text = r#"M optional a="x y = z;" b='single "quoted"' c="tab\there" d="\101\060\0" e="back\\slash" f="";"#;
    let entry = parse_single(text).expect("valid");
    assert_eq!(
        entry.options,
        options(&[
            ("a", "x y = z;"),
            ("b", "single \"quoted\""),
            ("c", "tab\there"),
            ("d", "A0\0"),
            ("e", "back\\slash"),
            ("f", ""),
        ])
    );
}

#[test]
fn unquoted_values_are_words() {
    let entry = parse_single("my.Module-1 SUFFICIENT key=va-lue_$1.2 k2=v;").expect("valid");
    assert_eq!(entry.login_module, "my.Module-1");
    assert_eq!(entry.control_flag, "sufficient");
    assert_eq!(entry.options, options(&[("key", "va-lue_$1.2"), ("k2", "v")]));
}

#[test]
fn parses_several_entries_and_comments() {
    let text =
        "/* first */ A required x=\"1\"; // the second:\n B Requisite; C optional y=z; D sufficient /* none */ ;";
    let entries = parse(text).expect("valid");
    let summary: Vec<(&str, &str, usize)> =
        entries.iter().map(|e| (e.login_module.as_str(), e.control_flag.as_str(), e.options.len())).collect();
    assert_eq!(summary, [("A", "required", 1), ("B", "requisite", 0), ("C", "optional", 1), ("D", "sufficient", 0)]);
    assert_eq!(
        parse_single(text).map_err(|e| e.0),
        Err("JAAS config property contains 4 login modules, should be 1 module".to_string())
    );
}

#[test]
fn later_duplicate_options_win() {
    let entry = parse_single(r#"M required user_a="1" user_a="2";"#).expect("valid");
    assert_eq!(entry.options, options(&[("user_a", "2")]));
}

#[test]
fn refuses_missing_semicolon() {
    assert_eq!(error(r#"M required username="admin""#), "JAAS config entry not terminated by semi-colon");
    assert_eq!(error("M required"), "JAAS config entry not terminated by semi-colon");
    assert_eq!(error("A required; B required"), "JAAS config entry not terminated by semi-colon");
}

#[test]
fn refuses_unknown_or_missing_control_flag() {
    assert_eq!(error("M mandatory;"), "Invalid login module control flag 'mandatory' in JAAS config");
    assert_eq!(error("M \"maybe\" a=b;"), "Invalid login module control flag 'maybe' in JAAS config");
    assert_eq!(error("M"), "Login module control flag not specified in JAAS config");
    assert_eq!(error("M ;"), "Login module control flag is not available in the JAAS config");
    assert_eq!(error("M 1;"), "Login module control flag is not available in the JAAS config");
}

#[test]
fn refuses_options_without_values() {
    assert_eq!(error("M required key;"), "Value not specified for key 'key' in JAAS config");
    assert_eq!(error("M required key=;"), "Value not specified for key 'key' in JAAS config");
    assert_eq!(error("M required key="), "Value not specified for key 'key' in JAAS config");
    assert_eq!(error("M required key=1234;"), "Value not specified for key 'key' in JAAS config");
    assert_eq!(error("M required key=-;"), "Value not specified for key 'key' in JAAS config");
    assert_eq!(error("M required key:value;"), "Value not specified for key 'key' in JAAS config");
    assert_eq!(error("M required =v;"), "Value not specified for key 'null' in JAAS config");
    assert_eq!(error("M required 12=v;"), "Option name not specified in JAAS config");
}

#[test]
fn refuses_empty_text_and_missing_module_name() {
    assert_eq!(error(""), "Login module not specified in JAAS config");
    assert_eq!(error("  // only a comment\n /* and another */ "), "Login module not specified in JAAS config");
    assert_eq!(error("\"\" required;"), "Login module name not specified in JAAS config");
    assert_eq!(error("; required;"), "Login module name not specified in JAAS config");
}

#[test]
fn a_quoted_value_ends_at_a_line_end_as_in_java() {
    let entry = parse_single("M required a=\"open\n;").expect("valid");
    assert_eq!(entry.options, options(&[("a", "open")]));
}

#[test]
fn a_lone_slash_comments_out_the_rest_of_the_line() {
    assert_eq!(error("M required path=/etc/x;"), "Value not specified for key 'path' in JAAS config");
    let entry = parse_single("M required path=\"/etc/x\";").expect("valid");
    assert_eq!(entry.options, options(&[("path", "/etc/x")]));
}

#[test]
fn plain_users_of_follow_kafkas_lookup() {
    let text = format!(
        r#"{PLAIN_LOGIN_MODULE} required user_a="first" user_b="b"; other.Module required user_c="c"; {PLAIN_LOGIN_MODULE} required user_a="second" user_d="d";"#
    );
    let entries = parse(&text).expect("valid");
    assert_eq!(plain_users_of(&entries), options(&[("a", "first"), ("b", "b"), ("d", "d")]));
}

#[test]
fn debug_hides_option_values() {
    let entry = parse_single(r#"M required user_a="hunter2";"#).expect("valid");
    let shown = format!("{entry:?}");
    assert!(shown.contains("user_a") && !shown.contains("hunter2"), "{shown}");
}

/// Corner cases whose outcome was taken from Kafka 4.3.1's own `JaasConfig`.
#[test]
fn matches_kafkas_tokenizer_corner_cases() {
    // The character after a lone '/' is part of the comment, even a line end.
    assert_eq!(error("M required a=b /\nc=d;"), "JAAS config entry not terminated by semi-colon");
    // A value starting like a number is a number, however it goes on.
    assert_eq!(error("M required a=-1x;"), "Value not specified for key 'a' in JAAS config");
    assert_eq!(error("M required a=x-1 b=.5;"), "Value not specified for key 'b' in JAAS config");
    // Quotes do not double as escapes.
    assert_eq!(error("M required a='it''s';"), "Value not specified for key 's' in JAAS config");
    // Octal escapes take three digits only up to \377.
    let entry = parse_single(r#"M required a="\777" b="\3777";"#).expect("valid");
    assert_eq!(entry.options, options(&[("a", "?7"), ("b", "\u{ff}7")]));
}

#[test]
fn arbitrary_text_never_panics() {
    let pieces =
        ["M", " ", "required", "=", ";", "\"", "'", "\\", "/", "*", "\n", "1", "-", ".", "user_a", "é", "\u{1F980}"];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..3000 {
        let mut text = String::new();
        for _ in 0..(state % 16) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push_str(pieces[(state % pieces.len() as u64) as usize]);
        }
        let _ = parse(&text);
        state = state.wrapping_add(1);
    }
}
