//! Kafka's own authorizer, filter and validation cases (StandardAuthorizerTest,
//! AuthorizerTest, BaseAuthorizerTest, ResourcePatternFilterTest,
//! AclBindingTest, AclControlManagerTest), restated against this module.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::KafkaPrincipal;

use AclOperation as Op;
use AclPermissionType::{Allow, Deny};
use AuthorizationResult::{Allowed, Denied};
use PatternType::{Literal, Prefixed};
use ResourceType::{Cluster, Group, Topic, TransactionalId};

const LOCALHOST: &str = "127.0.0.1";

fn acl(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    host: &str,
    operation: AclOperation,
    permission: AclPermissionType,
) -> AclBinding {
    AclBinding::new(
        ResourcePattern::new(resource_type, name, pattern_type),
        AccessControlEntry::new(principal, host, operation, permission),
    )
}

fn id(n: usize) -> AclId {
    let mut id = [0u8; 16];
    id[8..].copy_from_slice(&(n as u64).to_be_bytes());
    id
}

/// An authorizer with `super.users=User:superman` holding `acls`.
fn authorizer_with(acls: &[AclBinding]) -> Authorizer {
    let config = AuthorizerConfig::from_values(Some("User:superman"), None).unwrap();
    let mut authorizer = Authorizer::new(config);
    add_all(&mut authorizer, acls);
    authorizer
}

fn add_all(authorizer: &mut Authorizer, acls: &[AclBinding]) {
    static NEXT_ID: AtomicUsize = AtomicUsize::new(1000);
    for binding in acls {
        authorizer.add(id(NEXT_ID.fetch_add(1, Ordering::Relaxed)), binding.clone()).unwrap();
    }
}

fn user(name: &str) -> KafkaPrincipal {
    KafkaPrincipal::user(name)
}

/// Authorizes each (operation, type, name) for `name` from 127.0.0.1.
fn decide(
    authorizer: &Authorizer,
    name: &str,
    actions: &[(AclOperation, ResourceType, &str)],
) -> Vec<AuthorizationResult> {
    actions.iter().map(|(op, rt, resource)| authorizer.authorize(&user(name), LOCALHOST, *op, *rt, resource)).collect()
}

/// StandardAuthorizerTest.newFooAcl: bob on topics prefixed `foo_`.
fn foo_acl(operation: AclOperation, permission: AclPermissionType) -> AclBinding {
    acl(Topic, "foo_", Prefixed, "User:bob", "*", operation, permission)
}

/// StandardAuthorizerTest.newBarAcl: everyone on group `bar`.
fn bar_acl(operation: AclOperation, permission: AclPermissionType) -> AclBinding {
    acl(Group, "bar", Literal, "User:*", "*", operation, permission)
}

// ---- configuration ----

#[test]
fn acl_super_users_config_parses_as_kafka() {
    let parse = AuthorizerConfig::parse_super_users;
    assert!(parse(" ").unwrap().is_empty());
    let expected: Vec<&str> = vec!["User:alice", "User:bob"];
    assert_eq!(parse("User:bob;User:alice ").unwrap().iter().map(String::as_str).collect::<Vec<_>>(), expected);
    assert_eq!(parse(";  User:bob  ;  User:alice ").unwrap().iter().map(String::as_str).collect::<Vec<_>>(), expected);
    assert_eq!(
        parse("bob;:alice").unwrap_err().to_string(),
        "expected a string in format principalType:principalName but got bob"
    );
    assert!(AuthorizerConfig::from_values(None, None).unwrap().super_users.is_empty());
}

#[test]
fn acl_allow_everyone_config_parses_as_java_boolean() {
    let parse = |value| AuthorizerConfig::from_values(None, value).unwrap().allow_everyone_if_no_acl_found;
    assert!(!parse(None));
    assert!(parse(Some("true")));
    assert!(parse(Some(" TRUE ")));
    assert!(!parse(Some("false")));
    assert!(!parse(Some("yes")));
}

// ---- the decision ----

#[test]
fn acl_allow_everyone_if_no_acl_found_only_where_no_acl_applies() {
    let topic1 = [acl(Topic, "topic1", Literal, "User:Alice", "*", Op::Read, Allow)];
    let mut authorizer = authorizer_with(&topic1);
    authorizer.set_config(AuthorizerConfig::from_values(Some("User:alice;User:chris"), Some("true")).unwrap());
    // topic1 has an ACL (for someone else): Bob is denied, not defaulted.
    assert_eq!(
        decide(&authorizer, "Bob", &[(Op::Read, Topic, "topic1"), (Op::Read, Topic, "topic2")]),
        [Denied, Allowed]
    );
    let rule = authorizer.authorize_with_rule(&user("Bob"), LOCALHOST, Op::Read, Topic, "topic1");
    assert_eq!(rule, MatchingRule::Default(Denied));
    let rule = authorizer.authorize_with_rule(&user("Bob"), LOCALHOST, Op::Read, Topic, "topic2");
    assert_eq!(rule, MatchingRule::Default(Allowed));
    // An ACL of another resource type does not count either.
    assert_eq!(decide(&authorizer, "Bob", &[(Op::Read, Group, "topic1")]), [Allowed]);

    authorizer.set_config(AuthorizerConfig::from_values(Some("User:alice;User:chris"), Some("false")).unwrap());
    assert_eq!(
        decide(&authorizer, "Bob", &[(Op::Read, Topic, "topic1"), (Op::Read, Topic, "topic2")]),
        [Denied, Denied]
    );
    assert_eq!(decide(&authorizer, "Alice", &[(Op::Read, Topic, "topic1")]), [Allowed]);
}

#[test]
fn acl_no_acl_found_denies_unless_configured() {
    let authorizer = authorizer_with(&[]);
    assert_eq!(decide(&authorizer, "alice", &[(Op::Read, Topic, "foo")]), [Denied]);
    let open = Authorizer::new(AuthorizerConfig::from_values(None, Some("true")).unwrap());
    assert_eq!(decide(&open, "alice", &[(Op::Read, Topic, "foo")]), [Allowed]);
}

#[test]
fn acl_allow_implies_describe_but_deny_does_not() {
    let describe = (Op::Describe, Topic, "foo_bar");
    for op in [Op::Describe, Op::Read, Op::Write, Op::Delete, Op::Alter] {
        assert_eq!(decide(&authorizer_with(&[foo_acl(op, Allow)]), "bob", &[describe]), [Allowed], "ALLOW {op}");
    }
    // CREATE does not imply DESCRIBE; with an ACL on the resource, that is a deny.
    let create = authorizer_with(&[foo_acl(Op::Create, Allow)]);
    assert_eq!(
        create.authorize_with_rule(&user("bob"), LOCALHOST, Op::Describe, Topic, "foo_bar"),
        MatchingRule::Default(Denied)
    );
    for op in [Op::Read, Op::Write, Op::Delete, Op::Alter] {
        let both = authorizer_with(&[foo_acl(op, Deny), foo_acl(Op::Describe, Allow)]);
        assert_eq!(decide(&both, "bob", &[describe]), [Allowed], "DENY {op} leaves DESCRIBE alone");
    }
    assert_eq!(decide(&authorizer_with(&[foo_acl(Op::Describe, Deny)]), "bob", &[describe]), [Denied]);

    let describe_configs = (Op::DescribeConfigs, Topic, "foo_bar");
    for op in [Op::DescribeConfigs, Op::AlterConfigs] {
        assert_eq!(decide(&authorizer_with(&[foo_acl(op, Allow)]), "bob", &[describe_configs]), [Allowed]);
    }
    let deny_alter = authorizer_with(&[foo_acl(Op::AlterConfigs, Deny), foo_acl(Op::DescribeConfigs, Allow)]);
    assert_eq!(
        decide(&deny_alter, "bob", &[describe_configs, (Op::AlterConfigs, Topic, "foo_bar")]),
        [Allowed, Denied]
    );
}

#[test]
fn acl_principal_matching_and_the_user_wildcard() {
    let authorizer = authorizer_with(&[foo_acl(Op::Read, Allow), bar_acl(Op::Read, Deny)]);
    assert_eq!(decide(&authorizer, "bob", &[(Op::Read, Topic, "foo_bar")]), [Allowed]);
    assert_eq!(decide(&authorizer, "alice", &[(Op::Read, Topic, "foo_bar")]), [Denied]);
    // User:* covers every User principal...
    assert_eq!(decide(&authorizer, "alice", &[(Op::Read, Group, "bar")]), [Denied]);
    let rule = authorizer.authorize_with_rule(&user("alice"), LOCALHOST, Op::Read, Group, "bar");
    assert!(matches!(rule, MatchingRule::Acl { result: Denied, .. }));

    // `Group:*` is no wildcard, just a principal literally named `*`...
    let groups = authorizer_with(&[acl(Topic, "t", Literal, "Group:*", "*", Op::Read, Allow)]);
    let ops = KafkaPrincipal::new("Group", "ops");
    assert_eq!(groups.authorize(&ops, LOCALHOST, Op::Read, Topic, "t"), Denied);
    assert_eq!(groups.authorize(&KafkaPrincipal::new("Group", "*"), LOCALHOST, Op::Read, Topic, "t"), Allowed);
    // ...while `User:*` covers principals of every type: Kafka matches each
    // session as both its own principal and `User:*`.
    let users = authorizer_with(&[acl(Topic, "t", Literal, "User:*", "*", Op::Read, Allow)]);
    assert_eq!(users.authorize(&ops, LOCALHOST, Op::Read, Topic, "t"), Allowed);
    // The type is compared too, not just the name.
    let alice = authorizer_with(&[acl(Topic, "t", Literal, "User:alice", "*", Op::Read, Allow)]);
    assert_eq!(alice.authorize(&KafkaPrincipal::new("Group", "alice"), LOCALHOST, Op::Read, Topic, "t"), Denied);
}

#[test]
fn acl_simple_authorizations() {
    let authorizer = authorizer_with(&[
        foo_acl(Op::Read, Allow),
        foo_acl(Op::Write, Allow),
        bar_acl(Op::DescribeConfigs, Allow),
        bar_acl(Op::AlterConfigs, Allow),
    ]);
    assert_eq!(decide(&authorizer, "bob", &[(Op::Read, Topic, "foo_")]), [Allowed]);
    assert_eq!(decide(&authorizer, "fred", &[(Op::AlterConfigs, Group, "bar")]), [Allowed]);
}

#[test]
fn acl_deny_wins_even_against_a_more_specific_allow() {
    let authorizer = authorizer_with(&[
        acl(Topic, "foo", Literal, "User:alice", "*", Op::All, Deny),
        acl(Topic, "foo", Prefixed, "User:alice", "*", Op::Read, Allow),
        acl(Topic, "foo", Literal, "User:*", "*", Op::All, Deny),
        acl(Topic, "foo", Prefixed, "User:*", "*", Op::Describe, Allow),
    ]);
    let alice = [
        (Op::Write, Topic, "foo"),
        (Op::Read, Topic, "foo"),
        (Op::Describe, Topic, "foo"),
        (Op::Read, Topic, "foobar"),
    ];
    assert_eq!(decide(&authorizer, "alice", &alice), [Denied, Denied, Denied, Allowed]);
    let bob = [
        (Op::Describe, Topic, "foo"),
        (Op::Read, Topic, "foo"),
        (Op::Write, Topic, "foo"),
        (Op::Describe, Topic, "foobaz"),
        (Op::Read, Topic, "foobaz"),
    ];
    assert_eq!(decide(&authorizer, "bob", &bob), [Denied, Denied, Denied, Allowed, Denied]);
}

#[test]
fn acl_operation_all_covers_every_operation() {
    let authorizer = authorizer_with(&[
        acl(Topic, "foo", Literal, "User:*", "*", Op::All, Allow),
        acl(Topic, "bar", Prefixed, "User:alice", "*", Op::All, Allow),
        acl(Topic, "baz", Literal, "User:bob", "*", Op::All, Allow),
    ]);
    let alice = [(Op::Write, Topic, "foo"), (Op::DescribeConfigs, Topic, "bar"), (Op::Describe, Topic, "baz")];
    assert_eq!(decide(&authorizer, "alice", &alice), [Allowed, Allowed, Denied]);
    let bob = [(Op::Write, Topic, "foo"), (Op::Read, Topic, "bar"), (Op::Describe, Topic, "baz")];
    assert_eq!(decide(&authorizer, "bob", &bob), [Allowed, Denied, Allowed]);
    let malory = [(Op::Describe, Topic, "foo"), (Op::Write, Topic, "bar"), (Op::Read, Topic, "baz")];
    assert_eq!(decide(&authorizer, "malory", &malory), [Allowed, Denied, Denied]);
}

#[test]
fn acl_hosts_match_exactly_or_by_wildcard() {
    let (host1, host2) = ("192.168.1.1", "192.168.1.2");
    let authorizer = authorizer_with(&[
        acl(Topic, "foo", Literal, "User:alice", host1, Op::Read, Deny),
        acl(Topic, "foo", Literal, "User:alice", "*", Op::Read, Allow),
        acl(Topic, "bar", Literal, "User:bob", host2, Op::Read, Allow),
        acl(Topic, "bar", Literal, "User:*", LOCALHOST, Op::Describe, Allow),
    ]);
    let actions = [(Op::Read, Topic, "foo"), (Op::Read, Topic, "bar"), (Op::Describe, Topic, "bar")];
    let from = |name: &str, host: &str| -> Vec<AuthorizationResult> {
        actions.iter().map(|(op, rt, r)| authorizer.authorize(&user(name), host, *op, *rt, r)).collect()
    };
    assert_eq!(from("alice", LOCALHOST), [Allowed, Denied, Allowed]);
    assert_eq!(from("alice", host1), [Denied, Denied, Denied]);
    assert_eq!(from("alice", host2), [Allowed, Denied, Denied]);
    assert_eq!(from("bob", LOCALHOST), [Denied, Denied, Allowed]);
    assert_eq!(from("bob", host1), [Denied, Denied, Denied]);
    assert_eq!(from("bob", host2), [Denied, Allowed, Allowed]);
}

fn many_acls() -> Vec<AclBinding> {
    vec![
        acl(Topic, "green2", Literal, "User:*", "*", Op::Read, Allow),
        acl(Topic, "green", Prefixed, "User:bob", "*", Op::Read, Allow),
        acl(Topic, "betamax4", Literal, "User:bob", "*", Op::Read, Allow),
        acl(Topic, "betamax", Literal, "User:bob", "*", Op::Read, Allow),
        acl(Topic, "beta", Prefixed, "User:*", "*", Op::Read, Allow),
        acl(Topic, "alpha", Prefixed, "User:*", "*", Op::Read, Allow),
        acl(Topic, "alp", Prefixed, "User:bob", "*", Op::Read, Deny),
        acl(Group, "*", Literal, "User:bob", "*", Op::Write, Allow),
        acl(Group, "wheel", Literal, "User:*", "*", Op::Write, Deny),
    ]
}

#[test]
fn acl_many_acls_prefixes_and_wildcards() {
    let acls = many_acls();
    let authorizer = authorizer_with(&acls);
    assert_eq!(
        decide(&authorizer, "bob", &[(Op::Read, Topic, "green1"), (Op::Write, Group, "wheel")]),
        [Allowed, Denied]
    );
    let bob = [(Op::Read, Topic, "alpha"), (Op::Write, Group, "arbitrary"), (Op::Read, Topic, "ala")];
    assert_eq!(decide(&authorizer, "bob", &bob), [Denied, Allowed, Denied]);
    // The rules Kafka's audit log names: the `alp` prefix denies, `green` allows.
    let deny = authorizer.authorize_with_rule(&user("bob"), LOCALHOST, Op::Read, Topic, "alpha");
    let MatchingRule::Acl { id: deny_id, result: Denied } = deny else { panic!("{deny:?}") };
    assert_eq!(authorizer.get(&deny_id), Some(&acls[6]));
    let allow = authorizer.authorize_with_rule(&user("bob"), LOCALHOST, Op::Read, Topic, "green1");
    let MatchingRule::Acl { id: allow_id, result: Allowed } = allow else { panic!("{allow:?}") };
    assert_eq!(authorizer.get(&allow_id), Some(&acls[1]));
}

#[test]
fn acl_prefixed_patterns_match_names_they_start() {
    let authorizer = authorizer_with(&[
        acl(Topic, "fooa", Prefixed, "User:alice", "*", Op::All, Allow),
        acl(Topic, "foobar", Literal, "User:bob", "*", Op::All, Allow),
        acl(Topic, "f", Prefixed, "User:bob", "*", Op::All, Allow),
    ]);
    let bob = [(Op::Write, Topic, "foobarr"), (Op::Read, Topic, "goobar"), (Op::Read, Topic, "fooa")];
    assert_eq!(decide(&authorizer, "bob", &bob), [Allowed, Denied, Allowed]);
    let alice = [(Op::Describe, Topic, "fooa"), (Op::Write, Topic, "bar"), (Op::Read, Topic, "baz")];
    assert_eq!(decide(&authorizer, "alice", &alice), [Allowed, Denied, Denied]);
}

#[test]
fn acl_prefixed_allow_found_among_many_unrelated_denies() {
    let deny = |name: &str, pattern| acl(Topic, name, pattern, "User:*", "*", Op::Read, Deny);
    let mut acls = vec![
        deny("a_other", Literal),
        deny("a_other", Prefixed),
        deny("foo-3f2a", Prefixed),
        deny("foo-9c1b", Prefixed),
        deny("foo-77ee-zzz", Prefixed),
        deny("fooo-1234", Prefixed),
        deny("fo-5678", Prefixed),
        deny("fop-abcd", Prefixed),
        deny("fon-ef01", Prefixed),
        deny("fon-", Prefixed),
        deny("z_other", Prefixed),
        deny("z_other", Literal),
    ];
    acls.push(acl(Topic, "foo", Prefixed, "User:*", "*", Op::Read, Allow));
    let authorizer = authorizer_with(&acls);
    assert_eq!(decide(&authorizer, "alice", &[(Op::Read, Topic, "foo-0b9e5a")]), [Allowed]);
    assert_eq!(decide(&authorizer, "alice", &[(Op::Read, Topic, "foo-3f2a-x")]), [Denied]);
}

#[test]
fn acl_single_character_names() {
    let allow = |name: &str, pattern| acl(Topic, name, pattern, "User:*", "*", Op::Read, Allow);
    let mut authorizer = authorizer_with(&[allow("f", Literal)]);
    assert_eq!(decide(&authorizer, "alice", &[(Op::Read, Topic, "f"), (Op::Read, Topic, "foo")]), [Allowed, Denied]);
    add_all(&mut authorizer, &[allow("_", Prefixed)]);
    let actions = [(Op::Read, Topic, "_foo"), (Op::Read, Topic, "_"), (Op::Read, Topic, "foo_")];
    assert_eq!(decide(&authorizer, "alice", &actions), [Allowed, Allowed, Denied]);
}

#[test]
fn acl_wildcard_resource_applies_to_every_name() {
    let host1 = "192.168.3.1";
    let read_everything = acl(Topic, "*", Literal, "User:alice", host1, Op::Read, Allow);
    let mut authorizer = authorizer_with(&[read_everything]);
    let alice = user("alice");
    assert_eq!(authorizer.authorize(&alice, host1, Op::Read, Topic, "foo-1"), Allowed);
    add_all(&mut authorizer, &[acl(Topic, "foo-1", Literal, "User:alice", host1, Op::Write, Allow)]);
    assert_eq!(authorizer.authorize(&alice, host1, Op::Write, Topic, "foo-1"), Allowed);
    add_all(&mut authorizer, &[acl(Topic, "*", Literal, "User:alice", host1, Op::Write, Deny)]);
    assert_eq!(authorizer.authorize(&alice, host1, Op::Write, Topic, "foo-1"), Denied);
    // A prefixed `*` is an ordinary prefix, not a wildcard.
    let star_prefix = authorizer_with(&[acl(Topic, "*", Prefixed, "User:*", "*", Op::Read, Allow)]);
    assert_eq!(
        decide(&star_prefix, "alice", &[(Op::Read, Topic, "foo"), (Op::Read, Topic, "*foo")]),
        [Denied, Allowed]
    );
}

#[test]
fn acl_empty_resource_name_is_covered_only_by_the_wildcard() {
    let mut authorizer = authorizer_with(&[]);
    assert_eq!(decide(&authorizer, "alice", &[(Op::Read, Group, "")]), [Denied]);
    add_all(&mut authorizer, &[acl(Group, "*", Literal, "User:*", "*", Op::Read, Allow)]);
    assert_eq!(decide(&authorizer, "alice", &[(Op::Read, Group, "")]), [Allowed]);
}

#[test]
fn acl_topic_acls_by_host_with_implied_describe() {
    let (host1, host2) = ("192.168.1.1", "192.168.1.2");
    let topic = "foo-1";
    let entry =
        |principal: &str, host: &str, op, permission| acl(Topic, topic, Literal, principal, host, op, permission);
    let authorizer = authorizer_with(&[
        entry("User:alice", host1, Op::Read, Allow),
        entry("User:alice", host2, Op::Read, Allow),
        entry("User:alice", host1, Op::Read, Deny),
        entry("User:alice", host1, Op::Write, Allow),
        entry("User:alice", "*", Op::Describe, Allow),
        entry("User:rob", "*", Op::Read, Allow),
        entry("User:batman", "*", Op::Write, Allow),
    ]);
    let check = |name: &str, host: &str, op| authorizer.authorize(&user(name), host, op, Topic, topic);
    assert_eq!(check("alice", host2, Op::Read), Allowed);
    assert_eq!(check("alice", host1, Op::Read), Denied);
    assert_eq!(check("alice", host1, Op::Write), Allowed);
    assert_eq!(check("alice", host2, Op::Write), Denied);
    assert_eq!(check("alice", host1, Op::Describe), Allowed);
    assert_eq!(check("alice", host2, Op::Describe), Allowed);
    assert_eq!(check("alice", host1, Op::Alter), Denied);
    assert_eq!(check("alice", host2, Op::Alter), Denied);
    assert_eq!(check("rob", host1, Op::Describe), Allowed);
    assert_eq!(check("batman", host1, Op::Describe), Allowed);
    assert_eq!(check("rob", host1, Op::Read), Allowed);
    assert_eq!(check("batman", host1, Op::Write), Allowed);
}

#[test]
fn acl_super_users_pass_every_deny() {
    let deny_all = acl(Topic, "foo-1", Literal, "User:*", "*", Op::All, Deny);
    let mut authorizer = authorizer_with(&[deny_all]);
    authorizer.set_config(AuthorizerConfig::from_values(Some("User:superuser1; User:superuser2"), None).unwrap());
    for name in ["superuser1", "superuser2"] {
        assert_eq!(decide(&authorizer, name, &[(Op::Read, Topic, "foo-1")]), [Allowed]);
        let rule = authorizer.authorize_with_rule(&user(name), LOCALHOST, Op::Read, Topic, "foo-1");
        assert_eq!(rule, MatchingRule::SuperUser);
    }
    assert_eq!(decide(&authorizer, "random", &[(Op::Read, Topic, "foo-1")]), [Denied]);
    // Compared as `Type:name` text: the type counts, a prefix does not.
    let group = KafkaPrincipal::new("Group", "superuser1");
    assert_eq!(authorizer.authorize(&group, LOCALHOST, Op::Read, Topic, "foo-1"), Denied);
    assert_eq!(decide(&authorizer, "superuser", &[(Op::Read, Topic, "foo-1")]), [Denied]);
    assert_eq!(decide(&authorizer, "superuser10", &[(Op::Read, Topic, "foo-1")]), [Denied]);
}

#[test]
fn acl_deny_all_beats_allow_all() {
    let host = "192.168.2.1";
    let authorizer = authorizer_with(&[
        acl(Topic, "foo-1", Literal, "User:*", "*", Op::All, Allow),
        acl(Topic, "foo-1", Literal, "User:alice", host, Op::All, Deny),
    ]);
    assert_eq!(authorizer.authorize(&user("alice"), host, Op::Read, Topic, "foo-1"), Denied);
    assert_eq!(authorizer.authorize(&user("random"), "192.0.4.4", Op::Read, Topic, "foo-1"), Allowed);
}

/// AuthorizerTest.testAclInheritance, on the cluster resource: what an
/// ALLOW or a DENY of one operation says about every other.
#[test]
fn acl_inheritance_of_allow_and_deny() {
    let concrete: Vec<AclOperation> =
        Op::VALUES.iter().copied().filter(|op| !matches!(op, Op::Any | Op::Unknown)).collect();
    let allow_cases: [(AclOperation, &[AclOperation]); 6] = [
        (Op::All, &concrete),
        (Op::Read, &[Op::Describe]),
        (Op::Write, &[Op::Describe]),
        (Op::Delete, &[Op::Describe]),
        (Op::Alter, &[Op::Describe]),
        (Op::AlterConfigs, &[Op::DescribeConfigs]),
    ];
    for (parent, implied) in allow_cases {
        let authorizer = authorizer_with(&[acl(Cluster, CLUSTER_NAME, Literal, "User:alice", "*", parent, Allow)]);
        for op in &concrete {
            let expected = if *op == parent || implied.contains(op) { Allowed } else { Denied };
            assert_eq!(
                decide(&authorizer, "alice", &[(*op, Cluster, CLUSTER_NAME)]),
                [expected],
                "ALLOW {parent}, {op}"
            );
        }
    }
    let deny_cases: [(AclOperation, &[AclOperation]); 3] =
        [(Op::All, &concrete), (Op::Describe, &[]), (Op::DescribeConfigs, &[])];
    for (parent, implied) in deny_cases {
        let authorizer = authorizer_with(&[
            acl(Cluster, CLUSTER_NAME, Literal, "User:alice", "*", parent, Deny),
            acl(Cluster, CLUSTER_NAME, Literal, "User:alice", "*", Op::All, Allow),
        ]);
        for op in &concrete {
            let expected = if *op == parent || implied.contains(op) { Denied } else { Allowed };
            assert_eq!(
                decide(&authorizer, "alice", &[(*op, Cluster, CLUSTER_NAME)]),
                [expected],
                "DENY {parent}, {op}"
            );
        }
    }
}

#[test]
fn acl_any_non_allow_permission_counts_as_deny() {
    // Kafka weighs anything but ALLOW as a DENY; such an ACL cannot be
    // created, but a record from a newer version could decode this way.
    let odd = acl(Topic, "t", Literal, "User:*", "*", Op::Read, AclPermissionType::Unknown);
    let authorizer = authorizer_with(&[odd, acl(Topic, "t", Literal, "User:*", "*", Op::Read, Allow)]);
    assert_eq!(decide(&authorizer, "alice", &[(Op::Read, Topic, "t")]), [Denied]);
}

// ---- authorize_by_resource_type (BaseAuthorizerTest) ----

fn by_type(authorizer: &Authorizer, name: &str, host: &str, op: AclOperation, rt: ResourceType) -> bool {
    authorizer.authorize_by_resource_type(&user(name), host, op, rt).unwrap() == Allowed
}

const H1: &str = "192.168.1.1";
const H2: &str = "192.168.1.2";

fn ace(principal: &str, host: &str, op: AclOperation, permission: AclPermissionType) -> AccessControlEntry {
    AccessControlEntry::new(principal, host, op, permission)
}

fn bind(authorizer: &mut Authorizer, pattern: &ResourcePattern, entries: &[AccessControlEntry]) {
    let bindings: Vec<AclBinding> = entries.iter().map(|e| AclBinding::new(pattern.clone(), e.clone())).collect();
    add_all(authorizer, &bindings);
}

fn unbind(authorizer: &mut Authorizer, pattern: &ResourcePattern, entry: &AccessControlEntry) {
    let filter = AclBinding::new(pattern.clone(), entry.clone()).to_filter();
    for id in authorizer.matching_ids(&filter) {
        authorizer.remove(&id).unwrap();
    }
}

#[test]
fn acl_by_resource_type_follows_adds_and_removes() {
    let mut authorizer = authorizer_with(&[]);
    let resource = ResourcePattern::new(Topic, "sb1-4c1e", Literal);
    let deny_read = ace("User:user1", H1, Op::Read, Deny);
    let allow_read = ace("User:user1", H1, Op::Read, Allow);
    for _ in 0..3 {
        assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
        bind(&mut authorizer, &resource, std::slice::from_ref(&allow_read));
        assert!(by_type(&authorizer, "user1", H1, Op::Read, Topic));
        for _ in 0..3 {
            bind(&mut authorizer, &resource, std::slice::from_ref(&deny_read));
            assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
            unbind(&mut authorizer, &resource, &deny_read);
            assert!(by_type(&authorizer, "user1", H1, Op::Read, Topic));
        }
        unbind(&mut authorizer, &resource, &allow_read);
        assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
    }
}

#[test]
fn acl_by_resource_type_unrelated_deny_does_not_dominate_allow() {
    let mut authorizer = authorizer_with(&[]);
    let resource1 = ResourcePattern::new(Topic, "sb1-aaaa", Literal);
    let resource2 = ResourcePattern::new(Topic, "sb2-bbbb", Literal);
    let resource3 = ResourcePattern::new(Group, "s", Prefixed);
    bind(
        &mut authorizer,
        &resource1,
        &[
            ace("User:user1", H1, Op::Read, Deny),
            ace("User:user2", H1, Op::Read, Deny),
            ace("User:user1", H2, Op::Write, Deny),
            ace("User:user2", H2, Op::Read, Deny),
            ace("User:user1", H2, Op::Read, Allow),
        ],
    );
    bind(&mut authorizer, &resource2, &[ace("User:user1", H2, Op::Read, Deny)]);
    bind(&mut authorizer, &resource3, &[ace("User:user1", H2, Op::Read, Deny)]);
    for rt in [Topic, Group, TransactionalId, Cluster] {
        assert!(!by_type(&authorizer, "user1", H1, Op::Read, rt), "{rt}");
    }
    assert!(by_type(&authorizer, "user1", H2, Op::Read, Topic));
}

#[test]
fn acl_by_resource_type_deny_takes_precedence() {
    let mut authorizer = authorizer_with(&[]);
    let resource = ResourcePattern::new(Topic, "sb1-cccc", Literal);
    bind(&mut authorizer, &resource, &[ace("User:user1", H1, Op::Write, Allow)]);
    assert!(by_type(&authorizer, "user1", H1, Op::Write, Topic));
    bind(&mut authorizer, &resource, &[ace("User:user1", H1, Op::Write, Deny)]);
    assert!(!by_type(&authorizer, "user1", H1, Op::Write, Topic));
}

#[test]
fn acl_by_resource_type_prefixed_deny_dominates() {
    let mut authorizer = authorizer_with(&[]);
    let allow = ace("User:user1", H1, Op::Read, Allow);
    let deny = ace("User:user1", H1, Op::Read, Deny);
    let group = |name: &str| ResourcePattern::new(Group, name, Prefixed);
    bind(&mut authorizer, &group("abcde"), std::slice::from_ref(&allow));
    assert!(by_type(&authorizer, "user1", H1, Op::Read, Group));
    bind(&mut authorizer, &group("abcd"), std::slice::from_ref(&deny));
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Group));
    bind(&mut authorizer, &group("abc"), std::slice::from_ref(&allow));
    assert!(by_type(&authorizer, "user1", H1, Op::Read, Group));
    bind(&mut authorizer, &group("a"), std::slice::from_ref(&deny));
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Group));
    bind(&mut authorizer, &group("ab"), std::slice::from_ref(&allow));
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Group));
}

#[test]
fn acl_by_resource_type_wildcard_deny_dominates() {
    let mut authorizer = authorizer_with(&[]);
    let allow = ace("User:user1", H1, Op::Write, Allow);
    let deny = ace("User:user1", H1, Op::Write, Deny);
    let wildcard = ResourcePattern::new(Group, "*", Literal);
    bind(&mut authorizer, &ResourcePattern::new(Group, "hello", Prefixed), std::slice::from_ref(&allow));
    assert!(by_type(&authorizer, "user1", H1, Op::Write, Group));
    bind(&mut authorizer, &wildcard, std::slice::from_ref(&deny));
    assert!(!by_type(&authorizer, "user1", H1, Op::Write, Group));
    bind(&mut authorizer, &wildcard, std::slice::from_ref(&allow));
    assert!(!by_type(&authorizer, "user1", H1, Op::Write, Group));
    bind(&mut authorizer, &ResourcePattern::new(Group, "aloha", Literal), std::slice::from_ref(&allow));
    assert!(!by_type(&authorizer, "user1", H1, Op::Write, Group));
}

#[test]
fn acl_by_resource_type_literal_deny_blocks_only_its_literal_allow() {
    let mut authorizer = authorizer_with(&[]);
    let allow = ace("User:user1", H1, Op::Read, Allow);
    let deny = ace("User:user1", H1, Op::Read, Deny);
    bind(&mut authorizer, &ResourcePattern::new(Topic, "foo", Literal), std::slice::from_ref(&allow));
    bind(&mut authorizer, &ResourcePattern::new(Topic, "foo", Literal), std::slice::from_ref(&deny));
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
    // A PREFIXED allow of the same name is not blocked by the LITERAL deny.
    bind(&mut authorizer, &ResourcePattern::new(Topic, "foo", Prefixed), std::slice::from_ref(&allow));
    assert!(by_type(&authorizer, "user1", H1, Op::Read, Topic));
}

#[test]
fn acl_by_resource_type_with_all_operation() {
    let mut authorizer = authorizer_with(&[]);
    let resource = ResourcePattern::new(Topic, "sb1-dddd", Literal);
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
    bind(&mut authorizer, &resource, &[ace("User:user1", H1, Op::Write, Deny), ace("User:user1", H1, Op::All, Allow)]);
    assert!(by_type(&authorizer, "user1", H1, Op::Read, Topic));
    bind(&mut authorizer, &resource, &[ace("User:user1", H1, Op::All, Deny)]);
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
}

#[test]
fn acl_by_resource_type_with_wildcard_host() {
    let mut authorizer = authorizer_with(&[]);
    let resource1 = ResourcePattern::new(Topic, "sb1-eeee", Literal);
    let resource2 = ResourcePattern::new(Topic, "sb2-ffff", Literal);
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
    bind(&mut authorizer, &resource1, &[ace("User:user1", H1, Op::Read, Allow)]);
    assert!(by_type(&authorizer, "user1", H1, Op::Read, Topic));
    bind(&mut authorizer, &resource1, &[ace("User:user1", "*", Op::Read, Deny)]);
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
    bind(&mut authorizer, &resource2, &[ace("User:user1", H1, Op::Read, Deny)]);
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
    assert!(!by_type(&authorizer, "user1", H2, Op::Read, Topic));
    bind(&mut authorizer, &resource2, &[ace("User:user1", "*", Op::Read, Allow)]);
    assert!(by_type(&authorizer, "user1", H2, Op::Read, Topic));
    bind(&mut authorizer, &resource2, &[ace("User:user1", "*", Op::Read, Deny)]);
    assert!(!by_type(&authorizer, "user1", H2, Op::Read, Topic));
}

#[test]
fn acl_by_resource_type_with_wildcard_principal() {
    let mut authorizer = authorizer_with(&[]);
    let resource1 = ResourcePattern::new(Topic, "sb1-1111", Literal);
    let resource2 = ResourcePattern::new(Topic, "sb2-2222", Literal);
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
    bind(&mut authorizer, &resource1, &[ace("User:user1", H1, Op::Read, Allow)]);
    assert!(by_type(&authorizer, "user1", H1, Op::Read, Topic));
    bind(&mut authorizer, &resource1, &[ace("User:*", H1, Op::Read, Deny)]);
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
    bind(&mut authorizer, &resource2, &[ace("User:user1", H1, Op::Read, Deny)]);
    assert!(!by_type(&authorizer, "user1", H1, Op::Read, Topic));
    assert!(!by_type(&authorizer, "user2", H1, Op::Read, Topic));
    bind(&mut authorizer, &resource2, &[ace("User:*", H1, Op::Read, Allow)]);
    assert!(by_type(&authorizer, "user2", H1, Op::Read, Topic));
    bind(&mut authorizer, &resource2, &[ace("User:*", H1, Op::Read, Deny)]);
    assert!(!by_type(&authorizer, "user2", H1, Op::Read, Topic));
}

#[test]
fn acl_by_resource_type_super_user_passes_wildcard_denies() {
    let mut authorizer = authorizer_with(&[]);
    authorizer.set_config(AuthorizerConfig::from_values(Some("User:superuser1; User:superuser2"), None).unwrap());
    let deny_all = ace("User:*", "*", Op::All, Deny);
    for rt in [Topic, Cluster, Group, TransactionalId] {
        bind(&mut authorizer, &ResourcePattern::new(rt, "*", Literal), std::slice::from_ref(&deny_all));
    }
    for rt in [Topic, Cluster, Group, TransactionalId] {
        assert!(by_type(&authorizer, "superuser1", "192.0.4.4", Op::Read, rt), "{rt}");
        assert!(!by_type(&authorizer, "user1", "192.0.4.4", Op::Read, rt), "{rt}");
    }
}

#[test]
fn acl_by_resource_type_allow_everyone_if_no_acl_found() {
    let open = Authorizer::new(AuthorizerConfig::from_values(None, Some("true")).unwrap());
    assert!(by_type(&open, "alice", "192.168.0.1", Op::Read, Topic));
    assert!(by_type(&open, "alice", "192.168.0.1", Op::Write, Topic));
    // Kafka's probe resource `hardcode` has no ACL here, so the default
    // still applies even though another topic denies alice.
    let mut with_deny = open.clone();
    bind(&mut with_deny, &ResourcePattern::new(Topic, "secret", Literal), &[ace("User:alice", "*", Op::Read, Deny)]);
    assert!(by_type(&with_deny, "alice", "192.168.0.1", Op::Read, Topic));
    // A wildcard ACL applies to `hardcode` too, and denies.
    bind(&mut with_deny, &ResourcePattern::new(Topic, "*", Literal), &[ace("User:alice", "*", Op::Read, Deny)]);
    assert!(!by_type(&with_deny, "alice", "192.168.0.1", Op::Read, Topic));
}

#[test]
fn acl_by_resource_type_has_no_implied_operations_beyond_the_probe() {
    let mut authorizer = authorizer_with(&[]);
    bind(&mut authorizer, &ResourcePattern::new(Topic, "foo", Literal), &[ace("User:alice", "*", Op::Read, Allow)]);
    assert!(by_type(&authorizer, "alice", H1, Op::Read, Topic));
    assert!(!by_type(&authorizer, "alice", H1, Op::Describe, Topic));
    // Through the `hardcode` probe an ALLOW READ on a prefix of it does imply DESCRIBE.
    bind(&mut authorizer, &ResourcePattern::new(Topic, "hard", Prefixed), &[ace("User:alice", "*", Op::Read, Allow)]);
    assert!(by_type(&authorizer, "alice", H1, Op::Describe, Topic));
}

#[test]
fn acl_by_resource_type_refuses_filter_arguments() {
    let authorizer = authorizer_with(&[]);
    let alice = user("alice");
    let message = |op, rt| authorizer.authorize_by_resource_type(&alice, H1, op, rt).unwrap_err().to_string();
    assert_eq!(
        message(Op::Read, ResourceType::Any),
        "Must specify a non-filter resource type for authorizeByResourceType"
    );
    assert_eq!(message(Op::Read, ResourceType::Unknown), "Unknown resource type");
    assert_eq!(message(Op::Any, Topic), "Must specify a non-filter operation type for authorizeByResourceType");
    assert_eq!(message(Op::Unknown, Topic), "Unknown operation type");
}

// ---- the ACL set: add, remove, list, filters ----

#[test]
fn acl_list_in_kafka_order_and_after_removal() {
    let (foo_read, foo_write) = (foo_acl(Op::Read, Allow), foo_acl(Op::Write, Allow));
    let (bar_describe, bar_alter) = (bar_acl(Op::DescribeConfigs, Deny), bar_acl(Op::AlterConfigs, Deny));
    // Added out of order; listed by type, then (for one name) operation.
    let mut authorizer =
        authorizer_with(&[bar_alter.clone(), foo_write.clone(), bar_describe.clone(), foo_read.clone()]);
    let all = authorizer.acls(&AclBindingFilter::ANY);
    assert_eq!(all, [foo_read.clone(), foo_write.clone(), bar_describe.clone(), bar_alter.clone()]);
    let foo_write_id = authorizer.matching_ids(&foo_write.to_filter());
    assert_eq!(foo_write_id.len(), 1);
    assert_eq!(authorizer.remove(&foo_write_id[0]).unwrap(), foo_write);
    assert_eq!(authorizer.acls(&AclBindingFilter::ANY), [foo_read.clone(), bar_describe, bar_alter]);
    let topics =
        AclBindingFilter::new(ResourcePatternFilter::new(Topic, None, PatternType::Any), AccessControlEntryFilter::ANY);
    assert_eq!(authorizer.acls(&topics), [foo_read]);
    assert_eq!(authorizer.len(), 3);
}

#[test]
fn acl_names_list_in_reverse_order_as_kafka() {
    let names = ["a", "ab", "b"];
    let acls: Vec<AclBinding> = names.iter().map(|n| acl(Topic, n, Literal, "User:x", "*", Op::Read, Allow)).collect();
    let authorizer = authorizer_with(&acls);
    let listed: Vec<String> = authorizer.acls(&AclBindingFilter::ANY).into_iter().map(|b| b.pattern.name).collect();
    assert_eq!(listed, ["b", "ab", "a"]);
}

#[test]
fn acl_filters_select_for_describe_and_delete() {
    let alice = "User:alice";
    let resource1 = ResourcePattern::new(Topic, "foo-1234", Literal);
    let resource2 = ResourcePattern::new(Topic, "bar-5678", Literal);
    let prefixed = ResourcePattern::new(Topic, "bar-", Prefixed);
    let acl1 = AclBinding::new(resource1.clone(), ace(alice, "*", Op::Read, Allow));
    let acl2 = AclBinding::new(resource1.clone(), ace(alice, "192.168.0.1", Op::Write, Allow));
    let acl3 = AclBinding::new(resource2.clone(), ace(alice, "*", Op::Describe, Allow));
    let acl4 = AclBinding::new(prefixed.clone(), ace("User:*", "*", Op::Read, Allow));
    let authorizer = authorizer_with(&[acl1.clone(), acl2.clone(), acl3.clone(), acl4.clone()]);
    let set = |bindings: Vec<AclBinding>| {
        bindings.into_iter().map(|b| b.to_string()).collect::<std::collections::BTreeSet<_>>()
    };
    let of =
        |bindings: &[&AclBinding]| bindings.iter().map(|b| b.to_string()).collect::<std::collections::BTreeSet<_>>();
    let by_pattern =
        |pattern: &ResourcePattern| AclBindingFilter::new(pattern.to_filter(), AccessControlEntryFilter::ANY);

    assert_eq!(set(authorizer.acls(&AclBindingFilter::ANY)), of(&[&acl1, &acl2, &acl3, &acl4]));
    assert_eq!(set(authorizer.acls(&by_pattern(&resource1))), of(&[&acl1, &acl2]));
    assert_eq!(set(authorizer.acls(&by_pattern(&prefixed))), of(&[&acl4]));
    let matching = AclBindingFilter::new(
        ResourcePatternFilter::new(ResourceType::Any, Some(resource2.name.clone()), PatternType::Match),
        AccessControlEntryFilter::ANY,
    );
    assert_eq!(set(authorizer.acls(&matching)), of(&[&acl3, &acl4]));
    assert_eq!(authorizer.matching_ids(&matching).len(), 2);
    assert_eq!(authorizer.matching_ids(&acl1.to_filter()).len(), 1);
    let baz = AclBindingFilter::new(
        ResourcePatternFilter::new(Topic, Some("baz".to_string()), PatternType::Any),
        AccessControlEntryFilter::ANY,
    );
    assert!(authorizer.matching_ids(&baz).is_empty());
}

#[test]
fn acl_filter_by_principal_is_textual() {
    let resource = ResourcePattern::new(Topic, "foo-1", Literal);
    let by_principal = |principal: &str| {
        AclBindingFilter::new(
            ResourcePatternFilter::ANY,
            AccessControlEntryFilter::new(Some(principal.to_string()), None, Op::Any, AclPermissionType::Any),
        )
    };
    let specific = authorizer_with(&[AclBinding::new(resource.clone(), ace("User:alice", "*", Op::Write, Allow))]);
    assert!(specific.acls(&by_principal("User:*")).is_empty());
    assert_eq!(specific.acls(&by_principal("User:alice")).len(), 1);
    let wildcard = authorizer_with(&[AclBinding::new(resource, ace("User:*", "*", Op::Write, Allow))]);
    assert_eq!(wildcard.acls(&by_principal("User:*")).len(), 1);
    assert!(wildcard.acls(&by_principal("User:alice")).is_empty());
}

#[test]
fn acl_store_refuses_duplicates_and_unknown_ids() {
    let binding = acl(Topic, "topic-1", Literal, "User:user", "10.0.0.1", Op::All, Allow);
    let mut authorizer = authorizer_with(&[]);
    authorizer.add(id(1), binding.clone()).unwrap();
    let mut other = binding.clone();
    other.entry.operation = Op::Read;
    assert_eq!(authorizer.add(id(1), other), Err(AclStoreError::DuplicateId(id(1))));
    assert_eq!(authorizer.add(id(2), binding.clone()), Err(AclStoreError::DuplicateAcl(id(2))));
    assert_eq!(authorizer.len(), 1);
    assert_eq!(authorizer.remove(&id(2)), Err(AclStoreError::UnknownId(id(2))));
    assert_eq!(authorizer.remove(&id(1)), Ok(binding.clone()));
    assert!(authorizer.is_empty());
    assert_eq!(decide(&authorizer, "user", &[(Op::Read, Topic, "topic-1")]), [Denied]);
    // The same binding may come back under a new id once removed.
    authorizer.add(id(2), binding).unwrap();
    assert_eq!(
        AclStoreError::DuplicateId([0; 16]).to_string(),
        "An ACL with ID AAAAAAAAAAAAAAAAAAAAAA already exists."
    );
}

#[test]
fn acl_load_snapshot_replaces_or_keeps_everything() {
    let mut authorizer = authorizer_with(&[foo_acl(Op::Read, Allow)]);
    let snapshot = vec![(id(7), bar_acl(Op::Read, Allow)), (id(8), bar_acl(Op::Write, Allow))];
    authorizer.load_snapshot(snapshot).unwrap();
    assert_eq!(authorizer.len(), 2);
    assert_eq!(decide(&authorizer, "bob", &[(Op::Read, Topic, "foo_x"), (Op::Write, Group, "bar")]), [Denied, Allowed]);
    assert_eq!(authorizer.config().super_users.len(), 1);
    let duplicate = vec![(id(1), foo_acl(Op::Read, Allow)), (id(1), foo_acl(Op::Write, Allow))];
    assert!(authorizer.load_snapshot(duplicate).is_err());
    assert_eq!(authorizer.len(), 2);
}

#[test]
fn acl_binding_from_record_codes() {
    let binding = AclBinding::from_record(2, "foo", 4, "User:alice", "*", 3, 3);
    assert_eq!(binding, acl(Topic, "foo", Prefixed, "User:alice", "*", Op::Read, Allow));
    let unknown = AclBinding::from_record(99, "foo", 9, "User:alice", "*", 77, 5);
    assert_eq!(unknown.pattern.resource_type, ResourceType::Unknown);
    assert_eq!(unknown.pattern.pattern_type, PatternType::Unknown);
    assert!(unknown.is_unknown());
}

// ---- filter matching (ResourcePatternFilterTest, AclBindingTest) ----

#[test]
fn acl_resource_pattern_filter_matches_as_kafka() {
    use PatternType::{Any as AnyPattern, Match, Unknown as UnknownPattern};
    let filter = |rt, name: Option<&str>, pt| ResourcePatternFilter::new(rt, name.map(str::to_string), pt);
    let pattern = ResourcePattern::new;
    let cases = [
        (filter(Topic, Some("Name"), Literal), pattern(Group, "Name", Literal), false),
        (filter(Topic, Some("Different"), Prefixed), pattern(Topic, "Name", Prefixed), false),
        (filter(Topic, Some("NAME"), Literal), pattern(Topic, "Name", Literal), false),
        (filter(Topic, Some("Name"), Literal), pattern(Topic, "Name", Prefixed), false),
        (filter(ResourceType::Any, Some("Name"), Prefixed), pattern(Topic, "Name", Prefixed), true),
        (filter(Topic, None, Prefixed), pattern(Topic, "Name", Prefixed), true),
        (filter(Topic, None, AnyPattern), pattern(Topic, "Name", Prefixed), true),
        (filter(Topic, None, Match), pattern(Topic, "Name", Prefixed), true),
        (filter(Topic, Some("Name"), Literal), pattern(Topic, "Name", Literal), true),
        (filter(Topic, Some("Name"), AnyPattern), pattern(Topic, "Name", Literal), true),
        (filter(Topic, Some("Name"), Match), pattern(Topic, "Name", Literal), true),
        (filter(Topic, Some("Name-something"), Match), pattern(Topic, "Name", Literal), false),
        (filter(Topic, Some("*"), Literal), pattern(Topic, "*", Literal), true),
        (filter(Topic, Some("Name"), Literal), pattern(Topic, "*", Literal), false),
        (filter(Topic, Some("*"), Literal), pattern(Topic, "Name", Literal), false),
        (filter(Topic, Some("Name"), AnyPattern), pattern(Topic, "*", Literal), false),
        (filter(Topic, Some("Name"), Match), pattern(Topic, "*", Literal), true),
        (filter(Topic, Some("Name"), Prefixed), pattern(Topic, "Name", Prefixed), true),
        (filter(Topic, Some("Name"), Prefixed), pattern(Topic, "Name-something", Prefixed), false),
        (filter(Topic, Some("Name-something"), Prefixed), pattern(Topic, "Name", Prefixed), false),
        (filter(Topic, Some("Name-something"), AnyPattern), pattern(Topic, "Name", Prefixed), false),
        (filter(Topic, Some("Name-something"), Match), pattern(Topic, "Name", Prefixed), true),
        // Kafka throws here; an undecodable stored pattern simply does not match.
        (filter(Topic, Some("Name"), Match), pattern(Topic, "Name", UnknownPattern), false),
    ];
    for (filter, pattern, expected) in cases {
        assert_eq!(filter.matches(&pattern), expected, "{filter} vs {pattern}");
    }
    assert!(filter(ResourceType::Unknown, None, Literal).is_unknown());
    assert!(filter(Group, None, UnknownPattern).is_unknown());
}

#[test]
fn acl_binding_filter_matches_as_kafka() {
    let acl1 = acl(Topic, "mytopic", Literal, "User:ANONYMOUS", "", Op::All, Allow);
    let acl2 = acl(Topic, "mytopic", Literal, "User:*", "", Op::Read, Allow);
    let acl3 = acl(Topic, "mytopic2", Literal, "User:ANONYMOUS", "127.0.0.1", Op::Read, Deny);
    let unknown = acl(Topic, "mytopic2", Literal, "User:ANONYMOUS", "127.0.0.1", Op::Unknown, Deny);
    let entries = |principal: Option<&str>, permission| {
        AccessControlEntryFilter::new(principal.map(str::to_string), None, Op::Any, permission)
    };
    let any_anonymous =
        AclBindingFilter::new(ResourcePatternFilter::ANY, entries(Some("User:ANONYMOUS"), AclPermissionType::Any));
    let any_deny = AclBindingFilter::new(ResourcePatternFilter::ANY, entries(None, Deny));
    let any_mytopic = AclBindingFilter::new(
        ResourcePatternFilter::new(Topic, Some("mytopic".to_string()), Literal),
        entries(None, AclPermissionType::Any),
    );
    let check = |filter: &AclBindingFilter, expected: [bool; 4]| {
        let got = [&acl1, &acl2, &acl3, &unknown].map(|binding| filter.matches(binding));
        assert_eq!(got, expected, "{filter}");
    };
    check(&AclBindingFilter::ANY, [true, true, true, true]);
    check(&any_anonymous, [true, false, true, true]);
    check(&any_deny, [false, false, true, true]);
    check(&any_mytopic, [true, true, false, false]);

    assert!(!acl1.is_unknown() && !acl2.is_unknown() && !acl3.is_unknown());
    assert!(unknown.is_unknown());
    assert!(!any_anonymous.is_unknown() && !any_deny.is_unknown() && !any_mytopic.is_unknown());
    for binding in [&acl1, &acl2, &acl3] {
        assert_eq!(binding.to_filter().find_indefinite_field(), None);
        assert!(binding.to_filter().matches_at_most_one());
    }
    assert!(!any_anonymous.matches_at_most_one());
    assert!(!any_deny.matches_at_most_one());
    assert!(!any_mytopic.matches_at_most_one());
}

#[test]
fn acl_indefinite_fields_in_kafkas_words() {
    let exact = acl(Topic, "t", Literal, "User:a", "*", Op::Read, Allow).to_filter();
    let with = |f: &dyn Fn(&mut AclBindingFilter)| {
        let mut filter = exact.clone();
        f(&mut filter);
        filter.find_indefinite_field()
    };
    assert_eq!(with(&|f| f.pattern_filter.resource_type = ResourceType::Any), Some("Resource type is ANY."));
    assert_eq!(with(&|f| f.pattern_filter.resource_type = ResourceType::Unknown), Some("Resource type is UNKNOWN."));
    assert_eq!(with(&|f| f.pattern_filter.name = None), Some("Resource name is NULL."));
    assert_eq!(with(&|f| f.pattern_filter.pattern_type = PatternType::Match), Some("Resource pattern type is MATCH."));
    assert_eq!(
        with(&|f| f.pattern_filter.pattern_type = PatternType::Unknown),
        Some("Resource pattern type is UNKNOWN.")
    );
    // Kafka counts ANY with a name as definite.
    assert_eq!(with(&|f| f.pattern_filter.pattern_type = PatternType::Any), None);
    assert_eq!(with(&|f| f.entry_filter.principal = None), Some("Principal is NULL"));
    assert_eq!(with(&|f| f.entry_filter.host = None), Some("Host is NULL"));
    assert_eq!(with(&|f| f.entry_filter.operation = Op::Any), Some("Operation is ANY"));
    assert_eq!(with(&|f| f.entry_filter.operation = Op::Unknown), Some("Operation is UNKNOWN"));
    assert_eq!(with(&|f| f.entry_filter.permission_type = AclPermissionType::Any), Some("Permission type is ANY"));
    assert_eq!(
        with(&|f| f.entry_filter.permission_type = AclPermissionType::Unknown),
        Some("Permission type is UNKNOWN")
    );
}

#[test]
fn acl_bindings_and_filters_print_as_kafka() {
    let binding = acl(Topic, "foo", Literal, "User:alice", "*", Op::Read, Allow);
    assert_eq!(
        binding.to_string(),
        "(pattern=ResourcePattern(resourceType=TOPIC, name=foo, patternType=LITERAL), \
         entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW))"
    );
    assert_eq!(
        AclBindingFilter::ANY.to_string(),
        "(patternFilter=ResourcePattern(resourceType=ANY, name=<any>, patternType=ANY), \
         entryFilter=(principal=<any>, host=<any>, operation=ANY, permissionType=ANY))"
    );
}

// ---- validation (AclControlManagerTest, AclApis) ----

#[test]
fn acl_creation_validation_messages() {
    let valid = acl(Topic, "*", Literal, "User:*", "*", Op::Alter, Allow);
    assert_eq!(validate_new_acl(&valid), Ok(()));
    assert_eq!(validate_acl_creation(&valid), Ok(()));
    let message = |f: &dyn Fn(&mut AclBinding)| {
        let mut binding = valid.clone();
        f(&mut binding);
        validate_acl_creation(&binding).unwrap_err().to_string()
    };
    assert_eq!(message(&|b| b.pattern.pattern_type = PatternType::Unknown), "Invalid patternType UNKNOWN");
    assert_eq!(message(&|b| b.pattern.pattern_type = PatternType::Match), "Invalid patternType MATCH");
    assert_eq!(message(&|b| b.pattern.resource_type = ResourceType::Unknown), "Invalid resourceType UNKNOWN");
    assert_eq!(message(&|b| b.pattern.resource_type = ResourceType::Any), "Invalid resourceType ANY");
    assert_eq!(message(&|b| b.entry.operation = Op::Unknown), "Invalid operation UNKNOWN");
    assert_eq!(message(&|b| b.entry.operation = Op::Any), "Invalid operation ANY");
    assert_eq!(message(&|b| b.entry.permission_type = AclPermissionType::Unknown), "Invalid permissionType UNKNOWN");
    assert_eq!(message(&|b| b.entry.permission_type = AclPermissionType::Any), "Invalid permissionType ANY");
    assert_eq!(
        message(&|b| b.entry.principal = "alice".to_string()),
        "Could not parse principal from `alice` (no colon is present separating the principal type from the \
         principal name)"
    );
    // The broker refuses these before the controller sees them.
    assert_eq!(message(&|b| b.pattern.name.clear()), "Invalid empty resource name");
    assert_eq!(
        message(&|b| b.pattern.resource_type = Cluster),
        "The only valid name for the CLUSTER resource is kafka-cluster"
    );
    let mut cluster = valid.clone();
    cluster.pattern = ResourcePattern::new(Cluster, CLUSTER_NAME, Literal);
    assert_eq!(validate_acl_creation(&cluster), Ok(()));
    // The controller's own empty-name message, for a binding that skipped the broker.
    let mut empty = valid;
    empty.pattern.name.clear();
    assert_eq!(validate_new_acl(&empty).unwrap_err().to_string(), "Resource name should not be empty");
}

#[test]
fn acl_delete_filter_validation_messages() {
    let entries =
        |permission| AccessControlEntryFilter::new(Some("User:*".into()), Some("*".into()), Op::Any, permission);
    let patterns = |rt, pt| ResourcePatternFilter::new(rt, Some("*".to_string()), pt);
    let ok = AclBindingFilter::new(patterns(ResourceType::Any, Literal), entries(AclPermissionType::Any));
    assert_eq!(validate_delete_filter(&ok), Ok(()));
    assert_eq!(validate_delete_filter(&AclBindingFilter::ANY), Ok(()));
    let unknown_pattern =
        AclBindingFilter::new(patterns(ResourceType::Any, PatternType::Unknown), entries(AclPermissionType::Any));
    assert_eq!(validate_delete_filter(&unknown_pattern).unwrap_err().to_string(), "Unknown patternFilter.");
    let unknown_type = AclBindingFilter::new(patterns(ResourceType::Unknown, Literal), AccessControlEntryFilter::ANY);
    assert_eq!(validate_delete_filter(&unknown_type).unwrap_err().to_string(), "Unknown patternFilter.");
    let unknown_entry =
        AclBindingFilter::new(patterns(ResourceType::Any, PatternType::Match), entries(AclPermissionType::Unknown));
    assert_eq!(validate_delete_filter(&unknown_entry).unwrap_err().to_string(), "Unknown entryFilter.");
}
