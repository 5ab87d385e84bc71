//! The ACLs of one resource type, sorted by resource name, so that finding
//! the ACLs that apply to a resource costs a few ordered-map searches
//! instead of a scan of every ACL.
//!
//! The ACLs that apply to resource `R` are the LITERAL ones named `R`, the
//! LITERAL ones named `*`, and the PREFIXED ones whose name is a prefix of
//! `R`. Every prefix of `R` sorts at or before `R`, so they are found by
//! walking the names downward from `R`, as Kafka's StandardAuthorizerData
//! walks its sorted set: a name that is not a prefix of `R` shares some
//! first `n` bytes with it, and no prefix of `R` lies between that name and
//! `R[..n]`, so the walk jumps straight to `R[..n]`. Each jump shortens the
//! bound, and each step otherwise visits an ACL that applies, so the cost
//! is bounded by the matching ACLs and the length of `R`, not by how many
//! ACLs exist.

use std::collections::BTreeMap;
use std::ops::{Bound, ControlFlow};

use super::binding::WILDCARD_RESOURCE;
use super::types::{AclOperation, AclPermissionType, PatternType};
use super::AclId;

/// One ACL as the decision reads it; the name is its bucket's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct IndexedAcl {
    pub id: AclId,
    pub pattern_type: PatternType,
    pub operation: AclOperation,
    /// `Type:name` as stored; split at the first colon when matched.
    pub principal: String,
    pub host: String,
    pub permission_type: AclPermissionType,
}

impl IndexedAcl {
    /// Kafka's order within one resource name (StandardAcl.compareTo after
    /// type and name), kept so DescribeAcls lists ACLs as Kafka does and
    /// so an identical ACL is found by binary search.
    fn sort_key(&self) -> (PatternType, AclOperation, &str, &str, AclPermissionType) {
        (self.pattern_type, self.operation, &self.principal, &self.host, self.permission_type)
    }
}

/// The ACLs of one resource type, by resource name.
#[derive(Clone, Debug, Default)]
pub(super) struct ResourceIndex {
    by_name: BTreeMap<String, Vec<IndexedAcl>>,
}

impl ResourceIndex {
    /// Adds `acl` under `name`, unless an identical ACL is already there
    /// (then returns the id holding it and changes nothing).
    pub fn insert(&mut self, name: &str, acl: IndexedAcl) -> Result<(), AclId> {
        let bucket = self.by_name.entry(name.to_string()).or_default();
        match bucket.binary_search_by(|held| held.sort_key().cmp(&acl.sort_key())) {
            Ok(found) => Err(bucket[found].id),
            Err(position) => {
                bucket.insert(position, acl);
                Ok(())
            }
        }
    }

    /// Removes the ACL `id` held under `name`; false if it is not there.
    pub fn remove(&mut self, name: &str, id: &AclId) -> bool {
        let Some(bucket) = self.by_name.get_mut(name) else {
            return false;
        };
        let Some(position) = bucket.iter().position(|acl| acl.id == *id) else {
            return false;
        };
        bucket.remove(position);
        if bucket.is_empty() {
            self.by_name.remove(name);
        }
        true
    }

    /// Every ACL with its resource name, in Kafka's listing order: names
    /// in reverse, then the bucket order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &IndexedAcl)> {
        self.by_name.iter().rev().flat_map(|(name, bucket)| bucket.iter().map(move |acl| (name.as_str(), acl)))
    }

    /// The ACLs held under exactly `name`, in Kafka's order.
    pub fn named(&self, name: &str) -> &[IndexedAcl] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// Calls `visit` with each ACL whose pattern applies to the resource
    /// named `name`, until it breaks. Patterns that are neither LITERAL
    /// nor PREFIXED (never valid to store) apply to nothing.
    pub fn for_each_applying<'a>(
        &'a self,
        name: &str,
        mut visit: impl FnMut(&'a IndexedAcl) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.for_each_prefix_name(name, |key, bucket| {
            let exact = key.len() == name.len();
            for acl in bucket {
                let applies = match acl.pattern_type {
                    PatternType::Prefixed => true,
                    PatternType::Literal => exact,
                    _ => false,
                };
                if applies {
                    visit(acl)?;
                }
            }
            ControlFlow::Continue(())
        })?;
        if name == WILDCARD_RESOURCE {
            // The literal `*` ACLs were the exact match above.
            return ControlFlow::Continue(());
        }
        for acl in self.named(WILDCARD_RESOURCE) {
            if acl.pattern_type == PatternType::Literal {
                visit(acl)?;
            }
        }
        ControlFlow::Continue(())
    }

    /// Calls `visit` with each held name that is a prefix of `name` (or
    /// `name` itself), longest first, and its bucket.
    fn for_each_prefix_name<'a>(
        &'a self,
        name: &str,
        mut visit: impl FnMut(&'a str, &'a [IndexedAcl]) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let mut bound = name;
        'jump: loop {
            let below = (Bound::Unbounded, Bound::Included(bound));
            for (key, bucket) in self.by_name.range::<str, _>(below).rev() {
                let common = common_prefix_len(key, name);
                if common == key.len() {
                    visit(key, bucket)?;
                    continue;
                }
                // No prefix of `name` sorts between `name[..common]` and `key`.
                bound = &name[..floor_char_boundary(name, common)];
                continue 'jump;
            }
            return ControlFlow::Continue(());
        }
    }
}

/// How many leading bytes `a` and `b` share.
fn common_prefix_len(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// The largest char boundary of `text` at or below `index`: a name that
/// diverges from `text` inside a multi-byte character shares only the
/// characters before it.
fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(n: u8, pattern_type: PatternType) -> IndexedAcl {
        IndexedAcl {
            id: [n; 16],
            pattern_type,
            operation: AclOperation::Read,
            principal: format!("User:{n}"),
            host: "*".to_string(),
            permission_type: AclPermissionType::Allow,
        }
    }

    /// All strings over `alphabet` of length 1..=max_len.
    fn words(alphabet: &[&str], max_len: usize) -> Vec<String> {
        let mut all = Vec::new();
        let mut level = vec![String::new()];
        for _ in 0..max_len {
            level = level.iter().flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}"))).collect();
            all.extend(level.iter().cloned());
        }
        all
    }

    /// The walk finds exactly what checking every ACL finds, over every
    /// short name of an alphabet with a wildcard and multi-byte characters
    /// (including two sharing their first UTF-8 byte).
    #[test]
    fn walk_finds_exactly_the_applying_acls() {
        let alphabet = ["a", "b", "*", "é", "ê"];
        let mut index = ResourceIndex::default();
        let mut stored = Vec::new();
        for (n, name) in words(&alphabet, 3).into_iter().enumerate() {
            for pattern_type in [PatternType::Literal, PatternType::Prefixed] {
                // Distinct principals tell the ACLs apart.
                let mut held = acl(0, pattern_type);
                held.principal = format!("User:{n}-{pattern_type}");
                index.insert(&name, held.clone()).unwrap();
                stored.push((name.clone(), held));
            }
        }
        for resource in words(&alphabet, 4) {
            let mut found = Vec::new();
            let _ = index.for_each_applying(&resource, |acl| {
                found.push(acl.principal.clone());
                ControlFlow::Continue(())
            });
            found.sort();
            let mut expected: Vec<String> = stored
                .iter()
                .filter(|(name, acl)| match acl.pattern_type {
                    PatternType::Literal => *name == resource || name == "*",
                    _ => resource.starts_with(name.as_str()),
                })
                .map(|(_, acl)| acl.principal.clone())
                .collect();
            expected.sort();
            assert_eq!(found, expected, "resource {resource}");
        }
    }

    #[test]
    fn identical_acls_are_refused_and_removal_empties_buckets() {
        let mut index = ResourceIndex::default();
        index.insert("foo", acl(1, PatternType::Literal)).unwrap();
        let mut twin = acl(1, PatternType::Literal);
        twin.id = [2; 16];
        assert_eq!(index.insert("foo", twin), Err([1; 16]));
        index.insert("foo", acl(3, PatternType::Prefixed)).unwrap();
        assert!(index.remove("foo", &[1; 16]));
        assert!(!index.remove("foo", &[1; 16]));
        assert!(!index.remove("bar", &[3; 16]));
        assert!(index.remove("foo", &[3; 16]));
        assert!(index.by_name.is_empty());
    }

    #[test]
    fn break_stops_the_walk() {
        let mut index = ResourceIndex::default();
        index.insert("f", acl(1, PatternType::Prefixed)).unwrap();
        index.insert("fo", acl(2, PatternType::Prefixed)).unwrap();
        let mut visited = 0;
        let flow = index.for_each_applying("foo", |_| {
            visited += 1;
            ControlFlow::Break(())
        });
        assert_eq!(flow, ControlFlow::Break(()));
        assert_eq!(visited, 1);
    }
}
