//! The server-side assignors of the consumer group protocol (KIP-848):
//! `uniform` (the default: balanced by partition count, sticky to the
//! previous target) and `range` (per topic, contiguous ranges over members
//! sorted by id). Pure functions over member subscriptions and topic sizes.

use std::collections::{BTreeMap, BTreeSet};

use krabka_protocol::Uuid;

/// Partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

pub const UNIFORM: &str = "uniform";
pub const RANGE: &str = "range";

/// A topic the group subscribes to: its id and partition count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub id: Uuid,
    pub partitions: i32,
}

pub fn count(assignment: &Assignment) -> usize {
    assignment.values().map(BTreeSet::len).sum()
}

/// `range`: for each topic, members subscribed to it (by id) get contiguous
/// ranges, the first `partitions % members` one partition more.
pub fn range(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    topics: &BTreeMap<String, TopicInfo>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions.keys().map(|m| (m.clone(), Assignment::new())).collect();
    for (name, topic) in topics {
        let members: Vec<&String> = subscriptions.iter().filter(|(_, t)| t.contains(name)).map(|(m, _)| m).collect();
        if members.is_empty() {
            continue;
        }
        let per = topic.partitions / members.len() as i32;
        let extra = topic.partitions % members.len() as i32;
        let mut next = 0;
        for (i, member) in members.iter().enumerate() {
            let take = per + i32::from((i as i32) < extra);
            let set: BTreeSet<i32> = (next..next + take).collect();
            next += take;
            if !set.is_empty() {
                out.get_mut(*member).expect("member listed").insert(topic.id, set);
            }
        }
    }
    out
}

/// `uniform`: keeps each partition with its previous owner when that owner
/// still subscribes, hands the rest to the least loaded subscribed member,
/// then moves partitions from the most to the least loaded member until no
/// member has two more than another member that could take them.
pub fn uniform(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    topics: &BTreeMap<String, TopicInfo>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions.keys().map(|m| (m.clone(), Assignment::new())).collect();
    let eligible = |topic: &str| -> Vec<String> {
        subscriptions.iter().filter(|(_, t)| t.contains(topic)).map(|(m, _)| m.clone()).collect()
    };
    let mut unassigned = Vec::new();
    for (name, topic) in topics {
        let members = eligible(name);
        for partition in 0..topic.partitions {
            let owner = previous
                .iter()
                .find(|(m, a)| members.contains(m) && a.get(&topic.id).is_some_and(|set| set.contains(&partition)));
            match owner {
                Some((member, _)) => {
                    out.get_mut(member).expect("member listed").entry(topic.id).or_default().insert(partition);
                }
                None => unassigned.push((name.clone(), topic.id, partition)),
            }
        }
    }
    for (name, id, partition) in unassigned {
        let members = eligible(&name);
        if let Some(member) = members.iter().min_by_key(|m| (count(&out[*m]), (*m).clone())) {
            out.get_mut(member).expect("member listed").entry(id).or_default().insert(partition);
        }
    }
    // Even out: a bounded number of single-partition moves.
    let limit = topics.values().map(|t| t.partitions.max(0) as usize).sum::<usize>() + 1;
    for _ in 0..limit {
        let mut moved = false;
        let by_load: Vec<String> = {
            let mut members: Vec<String> = out.keys().cloned().collect();
            members.sort_by_key(|m| std::cmp::Reverse(count(&out[m])));
            members
        };
        'search: for heavy in &by_load {
            for (name, topic) in topics {
                let Some(owned) = out[heavy].get(&topic.id).cloned() else { continue };
                for light in eligible(name) {
                    if count(&out[heavy]) > count(&out[&light]) + 1 {
                        if let Some(&partition) = owned.iter().next_back() {
                            let from = out.get_mut(heavy).expect("member listed");
                            let set = from.get_mut(&topic.id).expect("owned topic");
                            set.remove(&partition);
                            if set.is_empty() {
                                from.remove(&topic.id);
                            }
                            out.get_mut(&light).expect("member listed").entry(topic.id).or_default().insert(partition);
                            moved = true;
                            break 'search;
                        }
                    }
                }
            }
        }
        if !moved {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(members: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        members.iter().map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect())).collect()
    }

    fn topics(list: &[(&str, u8, i32)]) -> BTreeMap<String, TopicInfo> {
        list.iter().map(|(n, id, p)| (n.to_string(), TopicInfo { id: Uuid([*id; 16]), partitions: *p })).collect()
    }

    #[test]
    fn range_gives_contiguous_ranges_per_topic() {
        let out = range(&subs(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]), &topics(&[("t", 1, 7)]));
        let id = Uuid([1; 16]);
        assert_eq!(out["a"][&id], (0..3).collect());
        assert_eq!(out["b"][&id], (3..5).collect());
        assert_eq!(out["c"][&id], (5..7).collect());
    }

    #[test]
    fn uniform_balances_keeps_owners_and_covers_every_partition() {
        let t = topics(&[("t", 1, 12), ("u", 2, 5)]);
        let s = subs(&[("a", &["t", "u"]), ("b", &["t", "u"]), ("c", &["t"])]);
        let first = uniform(&s, &t, &BTreeMap::new());
        let loads: Vec<usize> = first.values().map(count).collect();
        assert_eq!(loads.iter().sum::<usize>(), 17);
        assert!(loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1, "{loads:?}");
        // c only gets t.
        assert!(!first["c"].contains_key(&Uuid([2; 16])));
        // A fourth member: most partitions stay where they were.
        let s4 = subs(&[("a", &["t", "u"]), ("b", &["t", "u"]), ("c", &["t"]), ("d", &["t", "u"])]);
        let second = uniform(&s4, &t, &first);
        let kept: usize = ["a", "b", "c"]
            .iter()
            .map(|m| {
                second[*m]
                    .iter()
                    .map(|(id, set)| set.intersection(first[*m].get(id).unwrap_or(&BTreeSet::new())).count())
                    .sum::<usize>()
            })
            .sum();
        assert!(kept >= 12, "only {kept} partitions kept their owner");
        assert!(count(&second["d"]) >= 4);
        let all: usize = second.values().map(count).sum();
        assert_eq!(all, 17);
    }
}
