//! Expected values come from Kafka's own `SslPrincipalMapper` (run on
//! Java 17) for the same rules and names, Kafka's unit tests included.

use super::*;

fn mapper(rules: &str) -> SslPrincipalMapper {
    SslPrincipalMapper::from_rules(rules).unwrap_or_else(|error| panic!("{rules:?}: {error}"))
}

fn map(rules: &str, name: &str) -> Result<String, String> {
    mapper(rules).name(name).map_err(|error| error.message)
}

fn refusal(rules: &str) -> String {
    match SslPrincipalMapper::from_rules(rules) {
        Ok(mapper) => panic!("{rules:?} parsed as {mapper}"),
        Err(error) => error.to_string(),
    }
}

/// The reason a matching rule could not build a name, as Java words it.
fn failure(rules: &str, name: &str) -> String {
    let error = mapper(rules).name(name).expect_err(rules);
    assert_eq!(error.distinguished_name, name);
    let (_, reason) = error.message.split_once(&format!("cannot map {name}: ")).expect("a rule failure");
    reason.to_string()
}

#[test]
fn kafka_valid_rules() {
    for rules in [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ] {
        mapper(rules);
    }
}

#[test]
fn kafka_invalid_rules() {
    let cases = [
        ("default", "default", "default"),
        ("DEFAUL", "DEFAUL", "DEFAUL"),
        ("DEFAULT/L", "DEFAULT/L", "/L"),
        ("DEFAULT/U", "DEFAULT/U", "/U"),
        // The splitter cuts these at the comma; the first piece is refused.
        ("RULE:CN=(.*?),OU=ServiceUsers.*/$1", "RULE:CN=(.*?)", "RULE:CN=(.*?)"),
        ("rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "rule:^CN=(.*?)", "rule:^CN=(.*?)"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U", "/U"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?)", "RULE:^CN=(.*?)"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/U", "RULE:^CN=(.*?)", "RULE:^CN=(.*?)"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/LU", "RULE:^CN=(.*?)", "RULE:^CN=(.*?)"),
        ("RULE:x/y/Lz, DEFAULT", "RULE:x/y/Lz", "z"),
        ("DEFAULTX", "DEFAULTX", "X"),
        ("RULE:^CN=(.*)$/a\\/,DEFAULT", "RULE:^CN=(.*)$/a\\/", "RULE:^CN=(.*)$/a\\/"),
    ];
    for (rules, rule, unmatched) in cases {
        assert_eq!(refusal(rules), format!("Invalid rule: `{rule}`, unmatched substring: `{unmatched}`"), "{rules}");
    }
}

#[test]
fn kafka_mapping_example() {
    let rules = [
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]
    .join(", ");
    let mapper = mapper(&rules);
    let name = |dn: &str| mapper.name(dn).expect(dn);
    assert_eq!(name("CN=Duke,OU=ServiceUsers,O=Org,C=US"), "duke");
    assert_eq!(name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"), "duke@sme");
    assert_eq!(name("cn=duke,ou=sme,dc=mycp,dc=com"), "DUKE@SME");
    assert_eq!(name("cN=duke,OU=JavaSoft,O=Sun Microsystems"), "DUKE");
    assert_eq!(name("OU=JavaSoft,O=Sun Microsystems,C=US"), "OU=JavaSoft,O=Sun Microsystems,C=US");
}

#[test]
fn kafka_rules_splitting() {
    let cases = [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
        // Empty rules are ignored.
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        // Escapes keep slashes and commas inside a rule.
        (r"[RULE:\/\\\(\)\n\t/\/\/]", r"RULE:\/\\\(\)\n\t/\/\//"),
        (r"[RULE:\**\/+/*/L, RULE:\/*\**/**]", r"RULE:\**\/+/*/L,RULE:\/*\**/**/"),
        (
            r"[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
            r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
        ),
        // A line terminator ends the shortest-run rule form, so Kafka skips
        // text before it; one at the very end counts as the end.
        ("[DEFAULT, RULE:(.*)/x]", "DEFAULT\n,RULE:(.*)/x/"),
        ("[DEFAULT]", "RULE:(.*)/x/\u{2028},DEFAULT"),
        ("[RULE:(.*)/x]", "RULE:(.*)/x/\u{2028}"),
    ];
    for (expected, rules) in cases {
        assert_eq!(mapper(rules).to_string(), format!("SslPrincipalMapper(rules = {expected})"), "{rules:?}");
    }
    assert_eq!(refusal("a\nb"), "Invalid rule: `b`, unmatched substring: `b`");
    assert_eq!(refusal("RULE:a\\\nb/x/,DEFAULT"), "Invalid rule: `b/x/`, unmatched substring: `b/x/`");
}

#[test]
fn kafka_comma_with_whitespace() {
    let rules = r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT";
    assert_eq!(map(rules, r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz").as_deref(), Ok(r"Tkac\, Adam"));
}

#[test]
fn default_and_no_match() {
    assert_eq!(SslPrincipalMapper::default().name("CN=a,O=b").as_deref(), Ok("CN=a,O=b"));
    assert_eq!(SslPrincipalMapper::default().to_string(), "SslPrincipalMapper(rules = [DEFAULT])");
    let error = mapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/").name("CN=x,OU=y").expect_err("no rule applies");
    assert_eq!(error.distinguished_name, "CN=x,OU=y");
    assert_eq!(error.message, "No rules apply to CN=x,OU=y, rules [RULE:^CN=(.*?),OU=ServiceUsers.*$/$1]");
    assert_eq!(map("", "CN=x").unwrap_err(), "No rules apply to CN=x, rules []");
    // Kafka's `b*|a|c` matches each piece but not the whole name.
    assert!(map("RULE:b*|a|c/-/", "abc").is_err());
}

#[test]
fn commas_and_slashes_in_rules() {
    assert_eq!(map("RULE:a,b/x/,DEFAULT", "a,b").as_deref(), Ok("x"));
    assert_eq!(map(r"RULE:a\/b/x/,DEFAULT", "a/b").as_deref(), Ok("x"));
    assert_eq!(map(r"RULE:a\,b/x\,y/,DEFAULT", "a,b").as_deref(), Ok("x,y"));
}

#[test]
fn references_to_missing_groups_become_literal() {
    let dn = "CN=a,OU=b,O=c";
    assert_eq!(map("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$4/", dn).as_deref(), Ok("a@$4"));
    assert_eq!(map("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$12-$31-$123/", dn).as_deref(), Ok("a2-c1-a23"));
    assert_eq!(map("RULE:^CN=(.*?),OU=(.*?)$/$0|$01|$9/", "CN=a,OU=b").as_deref(), Ok("CN=a,OU=b|a|$9"));
    assert_eq!(map("RULE:^CN=(.*)$/$2/,DEFAULT", "CN=a").as_deref(), Ok("$2"));
    assert_eq!(map(r"RULE:^CN=(.*)$/\$1\\$1/", "CN=a").as_deref(), Ok(r"$1\a"));
    assert_eq!(map("RULE:^CN=(?<name>.*)$/${name}!/", "CN=a").as_deref(), Ok("a!"));
}

/// Kafka places the second and later escaping backslashes by positions in
/// the replacement as written, after the first insertion has shifted it.
#[test]
fn kafkas_misplaced_escapes_are_reproduced() {
    assert_eq!(failure("RULE:^CN=(.*)$/$5$6/", "CN=a"), "No group 6");
    assert_eq!(failure("RULE:^CN=(.*)$/x$5y$6z$7/", "CN=a"), "Illegal group reference");
    // Kafka also escapes an already escaped `\$5`, undoing the escape.
    assert_eq!(failure(r"RULE:^CN=(.*)$/\$5/", "CN=a"), "No group 5");
}

#[test]
fn replacements_java_refuses_fail_the_mapping() {
    let cases = [
        ("RULE:^CN=(.*)$/$99999999999/", "For input string: \"99999999999\""),
        ("RULE:^CN=.*$/$1/", "No group 1"),
        ("RULE:^CN=(.*)$/a$/", "Illegal group reference: group index is missing"),
        ("RULE:^CN=(.*)$/a$x/", "Illegal group reference"),
        ("RULE:^CN=(?<name>.*)$/${other}/", "No group with name {other}"),
        ("RULE:^CN=(?<name>.*)$/${}/", "named capturing group has 0 length name"),
        ("RULE:^CN=(?<name>.*)$/${name/", "named capturing group is missing trailing '}'"),
        ("RULE:^CN=(?<name>.*)$/${1a}/", "capturing group name {1a} starts with digit character"),
    ];
    for (rules, reason) in cases {
        assert_eq!(failure(rules, "CN=a"), reason, "{rules}");
    }
    // The rule fails only for names it matches.
    assert_eq!(map("RULE:^CN=.*$/$1/,DEFAULT", "O=a").as_deref(), Ok("O=a"));
}

/// The result is Java's `replaceAll` over the name, not the replacement of
/// the one whole-name match.
#[test]
fn replacement_runs_over_every_match() {
    assert_eq!(map("RULE:(.*?)/x/", "ab").as_deref(), Ok("xaxbx"));
    assert_eq!(map("RULE:CN=(.*?)/<$1>/", "CN=alice").as_deref(), Ok("<>alice"));
    assert_eq!(map("RULE:(a|ab)(c|bcd)(d*)/[$1|$2|$3]/", "abcd").as_deref(), Ok("[a|bcd|]"));
}

#[test]
fn case_flags_follow_javas_english_locale() {
    assert_eq!(
        map("RULE:(.*)/$1/L", "CN=\u{c9}LODIE,O=\u{39f}\u{394}\u{39f}\u{3a3}").as_deref(),
        Ok("cn=\u{e9}lodie,o=\u{3bf}\u{3b4}\u{3bf}\u{3c2}")
    );
    assert_eq!(map("RULE:(.*)/$1/U", "CN=stra\u{df}e,O=\u{fb01}x").as_deref(), Ok("CN=STRASSE,O=FIX"));
    assert_eq!(map("RULE:(.*)/$1/L", "CN=\u{130}stanbul").as_deref(), Ok("cn=i\u{307}stanbul"));
}

#[test]
fn patterns_mean_what_they_mean_in_java() {
    let cases = [
        // \w, \p{Alpha} are ASCII-only; \p{L} is not.
        (r"RULE:^CN=(\w+)$/$1/,DEFAULT", "CN=Jos\u{e9}", "CN=Jos\u{e9}"),
        (r"RULE:^CN=(\w+)$/$1/,DEFAULT", "CN=Jose_1", "Jose_1"),
        (r"RULE:^CN=(\p{Alpha}+)$/$1/,DEFAULT", "CN=Jos\u{e9}", "CN=Jos\u{e9}"),
        (r"RULE:^CN=(\p{L}+)$/$1/,DEFAULT", "CN=Jos\u{e9}", "Jos\u{e9}"),
        (r"RULE:^CN=(\S+)\s(\S+)$/$2 $1/", "CN=a\u{a0}b c", "c a\u{a0}b"),
        // `\<` is a literal `<`, not a word boundary.
        (r"RULE:^CN=\\<(.*)\\>$/$1/,DEFAULT", r"CN=\<a\>", "a"),
        // `.` stops at \r and U+2028 unless (?s) says otherwise.
        ("RULE:^CN=(.*)$/$1/,DEFAULT", "CN=a\rb", "CN=a\rb"),
        ("RULE:^CN=(.*)$/$1/,DEFAULT", "CN=a\u{2028}b", "CN=a\u{2028}b"),
        ("RULE:(?s)^CN=(.*)$/$1/,DEFAULT", "CN=a\u{2028}b", "a\u{2028}b"),
        ("RULE:^CN=(?s:(.*))$/$1/,DEFAULT", "CN=a\rb", "a\rb"),
        // \v is any vertical whitespace.
        (r"RULE:^CN=[^\v]*\v.*$/v/,DEFAULT", "CN=a\u{2028}b", "v"),
        (r"RULE:^CN=a\Q.*\E$/q/,DEFAULT", "CN=a.*", "q"),
        ("RULE:^CN=(?i)ALICE$/i/,DEFAULT", "CN=alice", "i"),
        // Comments mode, with a comment running to the end of the pattern.
        ("RULE:(?x)^CN= (\\w+) # the name\n$/$1/", "CN=alice", "alice"),
        ("RULE:(?x)^CN=(\\w+) # the name\n/$1/", "CN=alice", "alice"),
    ];
    for (rules, dn, expected) in cases {
        assert_eq!(map(rules, dn).as_deref(), Ok(expected), "{rules} on {dn:?}");
    }
}

#[test]
fn patterns_the_crate_cannot_run_as_java_does_are_refused() {
    for rules in [
        "RULE:a*+/x/",
        "RULE:a**/x/",
        "RULE:a*?+/x/",
        "RULE:x(?i)*/x/",
        r"RULE:(a)\1/x/",
        "RULE:(?=a)a/x/",
        "RULE:(?U)a/x/",
        "RULE:[/x/",
    ] {
        let message = refusal(rules);
        assert!(message.starts_with(&format!("Invalid rule: `{rules}`, bad pattern: ")), "{message}");
    }
}

#[test]
fn java_regex_rewriting() {
    let cases = [
        (r"a.b", r"(?R)a[^\n\r\x{85}\x{2028}\x{2029}]b"),
        (r"(?s)a.(?-s).", r"(?R)a(?s:.)[^\n\r\x{85}\x{2028}\x{2029}]"),
        (r"(?d).", r"(?R)(?-R)[^\n]"),
        (r"(?is:.)x.", r"(?R)(?i:(?s:.))x[^\n\r\x{85}\x{2028}\x{2029}]"),
        (r"\w[\W\d]", r"(?R)[0-9A-Za-z_][[^0-9A-Za-z_][0-9]]"),
        (r"\<\,\/\\", r"(?R)\x{3c}\x{2c}\x{2f}\x{5c}"),
        (r"\Q(.)\E+", r"(?R)\x{28}\x{2e}\x{29}+"),
        (r"\p{Lu}*\P{Punct}\pL", r"(?R)\p{Lu}*[^\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E]\pL"),
        (r"\e\cA\0101\x{41}\u0041", r"(?R)\x{1b}\x{1}\x{41}\x{41}\u0041"),
        (r"[]a](?u)(?iu:x)", r"(?R)[]a](?i:x)"),
        (r"a{2}{3}b+?", r"(?R)a{2}{3}b+?"),
        (
            "(?x) a . # any\n(?-x) .#",
            "(?R)(?x) a [^\\n\\r\\x{85}\\x{2028}\\x{2029}] (?-x) [^\\n\\r\\x{85}\\x{2028}\\x{2029}]#",
        ),
    ];
    for (java, expected) in cases {
        assert_eq!(java_regex::translate(java).as_deref(), Ok(expected), "{java}");
    }
}

#[test]
fn odd_rules_never_panic() {
    let odd = [
        "",
        ",",
        "\\",
        "RULE:",
        "RULE:/",
        "RULE:\\",
        "RULE:\\/",
        "RULE://\\",
        "RULE:(/)/",
        "RULE:[/]/",
        "RULE:\\Q/x/",
        "RULE:\\p{/x/",
        "RULE:\\0/x/",
        "RULE:\\c/x/",
        "RULE:(?/x/",
        "RULE:(?i/x/",
        "RULE:x{/y/",
        "RULE:\u{85}/\u{2028}/L",
        "RULE:(.*?)/\\u{1f600}$0/",
        "RULE:(.*)/$1\u{1f600}/U,\u{2029}",
        "RULE:/\\",
        "DEFAULT\u{2028}",
    ];
    for rules in odd {
        if let Ok(mapper) = SslPrincipalMapper::from_rules(rules) {
            for dn in ["", "CN=a", "\u{1f600}", "\r\n", "a\u{2028}"] {
                let _ = mapper.name(dn);
            }
        }
    }
    // After an empty match the search steps over a whole character.
    assert_eq!(map("RULE:(.*?)/-/", "a\u{1f600}").as_deref(), Ok("-a-\u{1f600}-"));
}
