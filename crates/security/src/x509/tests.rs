use super::*;

/// Certificates made with `openssl req -x509 -utf8 -subj ...` (Ed25519
/// keys, so they are short) and what Java 17 printed for each with
/// `((X509Certificate) cert).getSubjectX500Principal().getName()`.
const JAVA_CERTIFICATES: &[(&str, &str, &str)] = &[
    (
        "simple",
        concat!(
            "3082015130820103a003020102020107300506032b6570303a310b3009060355040613025553310d300b060355040a0c",
            "0441636d65310c300a060355040b0c03656e67310e300c06035504030c05616c6963653020170d323631323034313633",
            "3432375a180f32313236313131303136333432375a303a310b3009060355040613025553310d300b060355040a0c0441",
            "636d65310c300a060355040b0c03656e67310e300c06035504030c05616c696365302a300506032b6570032100162a11",
            "1bbf45c38d4bba0ba3670f5e819470179d699fae343849bf7cdb806e78a32c302a30090603551d1304023000301d0603",
            "551d0e041604144985cf7cc9fd6de23ac4b86cf9e68c43f334ad28300506032b6570034100eb4c3d37e89d1416e774c7",
            "da1e1f26bc8de01dfca2091441ffe660838f1a765be912975a0b3ac6a620bf4cfd66711dc1e5acc482cc6dcb4702df01",
            "bddc91310a",
        ),
        "CN=alice,OU=eng,O=Acme,C=US",
    ),
    (
        "no_extensions",
        concat!(
            "3081c23076020107300506032b6570300d310b300906035504030c0276313020170d3236313230343136333432375a18",
            "0f32313236313131303136333432375a300d310b300906035504030c027631302a300506032b6570032100162a111bbf",
            "45c38d4bba0ba3670f5e819470179d699fae343849bf7cdb806e78300506032b6570034100c63237f0782848f9a6c309",
            "7a814ecf0068c70d45588e4b0f6ee2350faa1a5b5a45852c50410324f3f3b454a6c413039a4cdf3fde60ed2a88ee3635",
            "e4b7a5ab06",
        ),
        "CN=v1",
    ),
    (
        "multi_valued",
        concat!(
            "308201343081e7a003020102020107300506032b6570302c310d300b060355040a0c0441636d65311b30080603550403",
            "0c0161300f060a0992268993f22c6401010c01623020170d3236313230343136333432375a180f323132363131313031",
            "36333432375a302c310d300b060355040a0c0441636d65311b300806035504030c0161300f060a0992268993f22c6401",
            "010c0162302a300506032b6570032100162a111bbf45c38d4bba0ba3670f5e819470179d699fae343849bf7cdb806e78",
            "a32c302a30090603551d1304023000301d0603551d0e041604144985cf7cc9fd6de23ac4b86cf9e68c43f334ad283005",
            "06032b65700341004952b98b10ba8f5d93400fc26bf1ec4295e11fbc5eb19a6c7711c588d817609807a2aa24be67578e",
            "42f5a72cec07e7ae4c32d087e313e76122a6fda162b7e906",
        ),
        "CN=a+UID=b,O=Acme",
    ),
    (
        "email",
        concat!(
            "3082015730820109a003020102020107300506032b6570303d310d300b060355040a0c0441636d65310c300a06035504",
            "030c03626f62311e301c06092a864886f70d010901160f626f62406578616d706c652e636f6d3020170d323631323034",
            "3136333432375a180f32313236313131303136333432375a303d310d300b060355040a0c0441636d65310c300a060355",
            "04030c03626f62311e301c06092a864886f70d010901160f626f62406578616d706c652e636f6d302a300506032b6570",
            "032100162a111bbf45c38d4bba0ba3670f5e819470179d699fae343849bf7cdb806e78a32c302a30090603551d130402",
            "3000301d0603551d0e041604144985cf7cc9fd6de23ac4b86cf9e68c43f334ad28300506032b6570034100b50ac2d125",
            "919d5d7f433f30eb4a7c85f12210f4ed8d3535804693f9f711ac43cabe4eab5814535094df78a3a596196d91e6e16e63",
            "c9f65cfffc7971da573b08",
        ),
        "1.2.840.113549.1.9.1=#160f626f62406578616d706c652e636f6d,CN=bob,O=Acme",
    ),
    (
        "specials",
        concat!(
            "308201143081c7a003020102020107300506032b6570301c311a301806035504030c11612c622b6322645c653c663e67",
            "3b683d693020170d3236313230343136333432375a180f32313236313131303136333432375a301c311a301806035504",
            "030c11612c622b6322645c653c663e673b683d69302a300506032b6570032100162a111bbf45c38d4bba0ba3670f5e81",
            "9470179d699fae343849bf7cdb806e78a32c302a30090603551d1304023000301d0603551d0e041604144985cf7cc9fd",
            "6de23ac4b86cf9e68c43f334ad28300506032b6570034100898581d121decf5a4fddb8ec913d0ed94efb982c52241a8f",
            "7f4c103aa90386fcf9d3741ecbdfb406ae7bad9672b661ef69b2a3c837ac493b01047e4d993c0908",
        ),
        "CN=a\\,b\\+c\\\"d\\\\e\\<f\\>g\\;h\\=i",
    ),
    (
        "hashes",
        concat!(
            "308201083081bba003020102020107300506032b657030163114301206035504030c0b236861736823696e6e65723020",
            "170d3236313230343136333432375a180f32313236313131303136333432375a30163114301206035504030c0b236861",
            "736823696e6e6572302a300506032b6570032100162a111bbf45c38d4bba0ba3670f5e819470179d699fae343849bf7c",
            "db806e78a32c302a30090603551d1304023000301d0603551d0e041604144985cf7cc9fd6de23ac4b86cf9e68c43f334",
            "ad28300506032b65700341002f0ae142a43ba900562076cf8add6afb8939b628682105271916c1ccf376571f8210c12e",
            "9e068e24fd08a5c04713ce40efd0f0761461a2581d39fd7b7214b802",
        ),
        "CN=\\#hash\\#inner",
    ),
    (
        "edge_spaces",
        concat!(
            "308201163081c9a003020102020107300506032b6570301d311b301906035504030c1220206c65616420616e64207472",
            "61696c20203020170d3236313230343136333432375a180f32313236313131303136333432375a301d311b3019060355",
            "04030c1220206c65616420616e6420747261696c2020302a300506032b6570032100162a111bbf45c38d4bba0ba3670f",
            "5e819470179d699fae343849bf7cdb806e78a32c302a30090603551d1304023000301d0603551d0e041604144985cf7c",
            "c9fd6de23ac4b86cf9e68c43f334ad28300506032b65700341007335a708401f1533356199f1f681d2ee6ee5b4e2dafe",
            "b2937ce939ba5091dd556e6d53b20d90310f77b2674d3ba44a7394f28b9c2c94a683098eb6388f38e903",
        ),
        "CN=\\ \\ lead and trail\\ \\ ",
    ),
    (
        "non_ascii",
        concat!(
            "3082012a3081dda003020102020107300506032b657030273125302306035504030c1c4ac3bc7267656e20c5bbc3b3c5",
            "82c48720e697a5e69cac20f09f98803020170d3236313230343136333432375a180f3231323631313130313633343237",
            "5a30273125302306035504030c1c4ac3bc7267656e20c5bbc3b3c582c48720e697a5e69cac20f09f9880302a30050603",
            "2b6570032100162a111bbf45c38d4bba0ba3670f5e819470179d699fae343849bf7cdb806e78a32c302a30090603551d",
            "1304023000301d0603551d0e041604144985cf7cc9fd6de23ac4b86cf9e68c43f334ad28300506032b65700341003051",
            "078cd1c4650d0a862d53bb2017f7f399b8c8863f7c0619479180f99a3b10408eae06a221d492d1faa1c79d3dc5a3956c",
            "94367c92e87068b1327779734906",
        ),
        "CN=J\u{fc}rgen \u{17b}\u{f3}\u{142}\u{107} \u{65e5}\u{672c} \u{1f600}",
    ),
    (
        "domain_components",
        concat!(
            "3082015530820107a003020102020107300506032b6570303c31133011060a0992268993f22c6401191603636f6d3117",
            "3015060a0992268993f22c64011916076578616d706c65310c300a06035504030c037376633020170d32363132303431",
            "36333432375a180f32313236313131303136333432375a303c31133011060a0992268993f22c6401191603636f6d3117",
            "3015060a0992268993f22c64011916076578616d706c65310c300a06035504030c03737663302a300506032b65700321",
            "00162a111bbf45c38d4bba0ba3670f5e819470179d699fae343849bf7cdb806e78a32c302a30090603551d1304023000",
            "301d0603551d0e041604144985cf7cc9fd6de23ac4b86cf9e68c43f334ad28300506032b6570034100da048ddb0bd0a7",
            "bb71d28241427d3ef1c6fb952b0e6166aef977bcf03a955a8894505c03e05048d68d24416565a615617c1c07099873ac",
            "fc1824b747944a5c0d",
        ),
        "CN=svc,DC=example,DC=com",
    ),
    (
        "serial_number",
        concat!(
            "308201143081c7a003020102020107300506032b6570301c310e300c060355040513053132333435310a300806035504",
            "030c01783020170d3236313230343136333432375a180f32313236313131303136333432375a301c310e300c06035504",
            "0513053132333435310a300806035504030c0178302a300506032b6570032100162a111bbf45c38d4bba0ba3670f5e81",
            "9470179d699fae343849bf7cdb806e78a32c302a30090603551d1304023000301d0603551d0e041604144985cf7cc9fd",
            "6de23ac4b86cf9e68c43f334ad28300506032b65700341001ba47c1e8e1513df0507c2728a72becccc39b933d2dc5b40",
            "d6e6830e0a4ad7c465e18b60533d449b95e5e0d097cb7084742b369117dd448e78ec17b31c0c3c03",
        ),
        "CN=x,2.5.4.5=#13053132333435",
    ),
    (
        "other_types",
        concat!(
            "308201b730820169a003020102020107300506032b6570306d3113301106035504080c0a43616c69666f726e69613116",
            "301406035504070c0d53616e204672616e636973636f3112301006035504090c0931204d61696e205374310d300b0603",
            "55040c0c04426f7373310b3009060355042a0c02416c310e300c06035504040c05536d6974683020170d323631323034",
            "3136333432375a180f32313236313131303136333432375a306d3113301106035504080c0a43616c69666f726e696131",
            "16301406035504070c0d53616e204672616e636973636f3112301006035504090c0931204d61696e205374310d300b06",
            "0355040c0c04426f7373310b3009060355042a0c02416c310e300c06035504040c05536d697468302a300506032b6570",
            "032100162a111bbf45c38d4bba0ba3670f5e819470179d699fae343849bf7cdb806e78a32c302a30090603551d130402",
            "3000301d0603551d0e041604144985cf7cc9fd6de23ac4b86cf9e68c43f334ad28300506032b65700341007c90e45b77",
            "3b3647f085f87884a5e25470e24ecf2a88f2c799fcf1db73635bd98c05ea22aad8846c70516d5ac83a91e193c83675bd",
            "7c6ff3f66a3fbc387de90f",
        ),
        "2.5.4.4=#0c05536d697468,2.5.4.42=#0c02416c,2.5.4.12=#0c04426f7373,STREET=1 Main St,L=San Francisco,ST=California",
    ),
];

/// DER Names built by hand and what Java 17 printed for each with
/// `new X500Principal(der).getName()`.
const JAVA_NAMES: &[(&str, &str, &str)] = &[
    (
        "unsorted_multi_valued_rdn_keeps_der_order",
        "301d311b300f060a0992268993f22c6401010c0162300806035504030c0161",
        "UID=b+CN=a",
    ),
    ("printable_string", "3016311430120603550403130b48656c6c6f20576f726c64", "CN=Hello World"),
    ("printable_string_high_bytes_decode_as_utf8", "300e310c300a0603550403130361e962", "CN=a\u{fffd}b"),
    ("t61_string_decodes_as_utf8", "30123110300e06035504031407636166e92080ff", "CN=caf\u{fffd} \u{fffd}\u{fffd}"),
    ("ia5_string", "300e310c300a06035504031603784079", "CN=x@y"),
    ("general_string", "300e310c300a06035504031b0367656e", "CN=gen"),
    ("bmp_string_decodes_as_utf8", "3011310f300d06035504031e06004a00f665e5", "CN=\\00J\\00\u{fffd}e\u{fffd}"),
    ("bmp_string_surrogate_bytes", "300f310d300b06035504031e04d83d0061", "CN=\u{fffd}\\=\\00a"),
    (
        "universal_string_is_hex",
        "30173115301306035504031c0c0000004a000000f60001f600",
        "CN=#1c0c0000004a000000f60001f600",
    ),
    ("visible_string_is_hex", "300e310c300a06035504031a03766973", "CN=#1a03766973"),
    ("numeric_string_is_hex", "300e310c300a06035504031203313233", "CN=#1203313233"),
    ("constructed_string_is_hex", "300e310c300a06035504032c030c0178", "CN=#2c030c0178"),
    ("context_tag_is_hex", "300c310a300806035504038c0178", "CN=#8c0178"),
    ("integer_value_is_hex", "300c310a30080603550403020105", "CN=#020105"),
    ("null_value_is_hex", "300b3109300706035504030500", "CN=#0500"),
    ("invalid_utf8", "30173115301306035504030c0c61ff62c328eda0807af09f98", "CN=a\u{fffd}b\u{fffd}(\u{fffd}z\u{fffd}"),
    (
        "invalid_utf8_sequences",
        "30143112301006035504030c09e28228f4908080c0af",
        "CN=\u{fffd}(\u{fffd}\u{fffd}\u{fffd}\u{fffd}\u{fffd}\u{fffd}",
    ),
    ("truncated_surrogate_at_end", "300e310c300a06035504030c0378eda0", "CN=x\u{fffd}"),
    ("nul_escaped", "300e310c300a06035504030c03610062", "CN=a\\00b"),
    ("control_characters", "30123110300e06035504030c070d20617f010a0d", "CN=\\\u{d}\\ a\u{7f}\u{1}\u{a}\\\u{d}"),
    ("carriage_returns_at_edges", "3010310e300c06035504030c050d0d78200d", "CN=\\\u{d}\\\u{d}x\\ \\\u{d}"),
    ("tabs_and_nbsp_not_escaped", "30123110300e06035504030c0709c2a078c2a009", "CN=\u{9}\u{a0}x\u{a0}\u{9}"),
    ("escapees", "30173115301306035504030c0c3c613e3b2271225c2c3d2b23", "CN=\\<a\\>\\;\\\"q\\\"\\\\\\,\\=\\+\\#"),
    ("only_hash", "300c310a300806035504030c0123", "CN=\\#"),
    ("only_spaces", "300e310c300a06035504030c03202020", "CN=\\ \\ \\ "),
    ("spaces_around_nul", "300f310d300b06035504030c0420610020", "CN=\\ a\\00\\ "),
    ("plus_in_multi_valued", "301a3118300a06035504030c03612b62300a060355040b0c03206320", "CN=a\\+b+OU=\\ c\\ "),
    ("inner_spaces_kept", "301e310d300b06035504060c0420555320310d300b06035504030c0461202062", "CN=a  b,C=\\ US\\ "),
    ("empty_value", "300b3109300706035504030c00", "CN="),
    ("empty_bmp_value", "300b3109300706035504031e00", "CN="),
    ("long_form_length_reencoded", "300c310a300806022a030c81017a", "1.2.3=#0c017a"),
    ("long_form_length_text", "300e310c300a06035504030c8200017a", "CN=z"),
    ("four_length_bytes", "3010310e300c06035504030c84000000017a", "CN=z"),
    ("email_as_utf8", "30143112301006092a864886f70d0109010c03614062", "1.2.840.113549.1.9.1=#0c03614062"),
    ("domain_component_ia5", "301531133011060a0992268993f22c6401191603636f6d", "DC=com"),
    ("empty_name", "3000", ""),
    ("empty_rdn", "30023100", ""),
    ("empty_rdn_between", "301a310a300806035504030c01783100310a3008060355040a0c0179", "O=y,,CN=x"),
    ("arc_beyond_64_bits", "301631143012060d883782808080808080808000010c0178", "2.999.18446744073709551616.1=#0c0178"),
    (
        "first_arc_beyond_64_bits",
        "301731153013060effffffffffffffffffffffff7f010c0178",
        "2.2475880078570760549798248367.1=#0c0178",
    ),
    (
        "first_arcs",
        "302a3109300706024f050c0178310830060601000c0178310830060601500c017831093007060281000c0178",
        "2.48=#0c0178,2.0=#0c0178,0.0=#0c0178,1.39.5=#0c0178",
    ),
    ("cn_oid_with_extra_arc", "300d310b30090604550403000c0178", "2.5.4.3.0=#0c0178"),
    (
        "keywords_and_others",
        concat!(
            "3081ce310a300806035504030c0176310a300806035504060c0176310a300806035504070c0176310a30080603550408",
            "0c0176310a3008060355040a0c0176310a3008060355040b0c0176310a300806035504090c01763111300f060a099226",
            "8993f22c6401190c01763111300f060a0992268993f22c6401010c0176310a3008060355042e0c0176310a3008060355",
            "040c0c0176310a3008060355042b0c0176310a3008060355042c0c0176310a300806035504040c0176310a3008060355",
            "042a0c0176310a300806035504050c0176",
        ),
        "2.5.4.5=#0c0176,2.5.4.42=#0c0176,2.5.4.4=#0c0176,2.5.4.44=#0c0176,2.5.4.43=#0c0176,2.5.4.12=#0c0176,2.5.4.46=#0c0176,UID=v,DC=v,STREET=v,OU=v,O=v,ST=v,L=v,C=v,CN=v",
    ),
];

/// DER Names Java 17 refuses ("improperly specified input name").
const JAVA_REFUSED_NAMES: &[(&str, &str)] = &[
    ("oid_leading_0x80", "300c310a300806032a80010c0178"),
    ("oid_unterminated", "300b3109300706022a810c0178"),
    ("oid_empty", "30093107300506000c0178"),
    ("attribute_extra_value", "300f310d300b06035504030c01780c0179"),
    ("attribute_no_value", "3009310730050603550403"),
    ("high_tag_number", "300d310b300906035504031f028101"),
    ("rdn_not_set", "300c300a300806035504030c0178"),
    ("set_of_non_sequence", "300531030c0178"),
    ("five_length_bytes", "3011310f300d06035504030c8500000000017a"),
    ("length_above_i32", "3010310e300c06035504030c84800000017a"),
    ("nested_indefinite_length", "300e310c300a06035504030c807a0000"),
    ("name_is_set", "310c310a300806035504030c0178"),
];

fn hex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd hex length");
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex")).collect()
}

/// Formats a bare DER Name, as Java's `new X500Principal(byte[])` reads one.
fn name_string(der: &[u8]) -> Result<String, X509Error> {
    let mut reader = Reader { bytes: der, offset: 0 };
    let name = reader.expect(TAG_SEQUENCE)?;
    format_name(&name)
}

fn certificate(case: &str) -> Vec<u8> {
    let (_, der, _) = JAVA_CERTIFICATES.iter().find(|(name, _, _)| *name == case).expect("known case");
    hex(der)
}

/// A Name with one RDN holding one attribute of the given OID encoding.
fn name_with_oid(oid: &[u8]) -> Vec<u8> {
    let mut attribute = vec![0x06, 0x82, (oid.len() >> 8) as u8, oid.len() as u8];
    attribute.extend_from_slice(oid);
    attribute.extend_from_slice(&[0x0c, 0x01, b'x']);
    let mut rdn = vec![0x30, 0x82, (attribute.len() >> 8) as u8, attribute.len() as u8];
    rdn.extend(attribute);
    let mut name = vec![0x31, 0x82, (rdn.len() >> 8) as u8, rdn.len() as u8];
    name.extend(rdn);
    let mut der = vec![0x30, 0x82, (name.len() >> 8) as u8, name.len() as u8];
    der.extend(name);
    der
}

#[test]
fn certificates_match_java() {
    for (case, der, expected) in JAVA_CERTIFICATES {
        assert_eq!(subject_name(&hex(der)).as_deref(), Ok(*expected), "{case}");
    }
}

#[test]
fn names_match_java() {
    for (case, der, expected) in JAVA_NAMES {
        assert_eq!(name_string(&hex(der)).as_deref(), Ok(*expected), "{case}");
    }
}

#[test]
fn names_java_refuses_are_errors() {
    for (case, der) in JAVA_REFUSED_NAMES {
        assert!(name_string(&hex(der)).is_err(), "{case}");
    }
}

#[test]
fn refusals_say_what_is_wrong() {
    let error = |case: &str| {
        let (_, der) = JAVA_REFUSED_NAMES.iter().find(|(name, _)| *name == case).expect("known case");
        name_string(&hex(der)).expect_err(case)
    };
    assert_eq!(error("oid_leading_0x80"), X509Error::BadObjectIdentifier { offset: 6 });
    assert_eq!(error("attribute_extra_value"), X509Error::TrailingBytes { offset: 14, count: 3 });
    assert_eq!(error("high_tag_number"), X509Error::HighTagNumber { offset: 11 });
    assert_eq!(error("rdn_not_set"), X509Error::UnexpectedTag { offset: 2, expected: TAG_SET, found: TAG_SEQUENCE });
    assert_eq!(error("five_length_bytes"), X509Error::LengthTooLarge { offset: 12 });
    assert_eq!(error("nested_indefinite_length"), X509Error::IndefiniteLength { offset: 12 });
    assert_eq!(error("name_is_set"), X509Error::UnexpectedTag { offset: 0, expected: TAG_SEQUENCE, found: TAG_SET });
}

/// Java accepts an OID of 4096 content bytes and refuses 4097.
#[test]
fn oid_length_limit_is_javas() {
    let mut oid = vec![0x2a];
    oid.resize(4096, 0x01);
    let printed = name_string(&name_with_oid(&oid)).expect("4096 bytes");
    assert!(printed.starts_with("1.2.1.1.") && printed.ends_with(".1=#0c0178"), "{printed}");
    assert_eq!(printed.matches('.').count(), 4096);
    oid.push(0x01);
    assert!(matches!(name_string(&name_with_oid(&oid)), Err(X509Error::BadObjectIdentifier { .. })));
}

#[test]
fn huge_arcs_print_in_decimal() {
    // 2^7000 - 1: 999 bytes of 0xff then 0x7f, 1000 groups of seven ones.
    let mut oid = vec![0x2a];
    oid.extend(std::iter::repeat_n(0xff, 999));
    oid.push(0x7f);
    let printed = name_string(&name_with_oid(&oid)).expect("valid");
    let arc = printed.strip_prefix("1.2.").and_then(|rest| rest.strip_suffix("=#0c0178")).expect("shape");
    assert_eq!(arc.len(), 2108);
    assert!(arc.starts_with("16216967556622020264") && arc.ends_with("29375"), "{arc}");
    assert_eq!(arc_decimal(&[0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], 0), "9223372036854775808");
    assert_eq!(arc_decimal(&[0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], 80), "9223372036854775728");
    assert_eq!(
        arc_decimal(&[0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], 80),
        "2361183241434822606768"
    );
}

#[test]
fn certificate_structure_is_checked() {
    let der = certificate("simple");
    let mut trailing = der.clone();
    trailing.push(0);
    assert_eq!(subject_name(&trailing), Err(X509Error::TrailingBytes { offset: der.len(), count: 1 }));
    assert_eq!(subject_name(&[]), Err(X509Error::Truncated { offset: 0 }));
    assert!(matches!(subject_name(&[0x30, 0x80, 0x00, 0x00]), Err(X509Error::IndefiniteLength { offset: 1 })));
    // tbsCertificates with a SET for validity, without a subject, with an
    // empty subject, and without a serial number.
    assert_eq!(
        subject_name(&hex("300b3009020101300030003100")),
        Err(X509Error::UnexpectedTag { offset: 11, expected: TAG_SEQUENCE, found: TAG_SET })
    );
    assert_eq!(subject_name(&hex("300b3009020101300030003000")), Err(X509Error::Truncated { offset: 13 }));
    assert_eq!(subject_name(&hex("300d300b0201013000300030003000")).as_deref(), Ok(""));
    assert_eq!(
        subject_name(&hex("300f300d30000201013000300030003000")),
        Err(X509Error::UnexpectedTag { offset: 4, expected: TAG_INTEGER, found: TAG_SEQUENCE })
    );
}

#[test]
fn every_prefix_and_byte_flip_is_handled() {
    for (case, der, _) in JAVA_CERTIFICATES {
        let der = hex(der);
        for end in 0..der.len() {
            assert!(subject_name(&der[..end]).is_err(), "{case} prefix {end}");
        }
        for index in 0..der.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut mutated = der.clone();
                mutated[index] ^= flip;
                let _ = subject_name(&mutated);
            }
        }
    }
}

#[test]
fn valid_utf8_decodes_as_itself() {
    for text in ["", "plain", "J\u{fc}rgen", "\u{65e5}\u{672c}", "\u{1f600}x", "\u{10ffff}\u{ffff}\u{800}\u{7ff}\u{80}"]
    {
        assert_eq!(decode_utf8_like_java(text.as_bytes()), text);
    }
}

/// Each malformed input and what Java 17's `new String(bytes, UTF_8)` made
/// of it (U+FFFD written as `?`).
#[test]
fn malformed_utf8_matches_java() {
    let cases: &[(&[u8], &str)] = &[
        (b"\x80", "?"),
        (b"\xc0\xaf", "??"),
        (b"\xc3", "?"),
        (b"\xc3(", "?("),
        (b"\xe0\x80\x80", "???"),
        (b"\xe2\x82", "?"),
        (b"\xe2\x82(", "?("),
        (b"\xed\xa0\x80", "?"),
        (b"\xed\xa0", "?"),
        (b"\xf0\x9f\x98", "?"),
        (b"\xf0\x9f\x98(", "?("),
        (b"\xf0\x9f(", "?("),
        (b"\xf0\x80\x80\x80", "????"),
        (b"\xf4\x90\x80\x80", "????"),
        (b"\xf5\x80\x80\x80", "????"),
        (b"\xf8\x88\x80\x80\x80", "?????"),
        (b"\xff\xfe", "??"),
    ];
    for (bytes, expected) in cases {
        assert_eq!(decode_utf8_like_java(bytes).replace('\u{fffd}', "?"), *expected, "{bytes:x?}");
    }
}
