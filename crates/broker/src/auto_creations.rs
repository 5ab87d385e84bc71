//! The topics this broker asked the active controller to auto-create and
//! has no answer for yet (Kafka's in-flight topics): a Metadata request for
//! one of them does not ask again.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The set of topics in flight.
#[derive(Default)]
pub struct AutoCreations(Arc<Mutex<HashSet<String>>>);

/// Topics claimed in flight, released when dropped (the answer came, or the
/// task creating them ended however it did).
pub struct Claimed {
    names: Vec<String>,
    in_flight: Arc<Mutex<HashSet<String>>>,
}

impl AutoCreations {
    /// Claims those of `names` not in flight yet; None if there are none.
    pub fn claim(&self, names: &[String]) -> Option<Claimed> {
        let mut in_flight = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let names: Vec<String> = names.iter().filter(|name| in_flight.insert((*name).clone())).cloned().collect();
        (!names.is_empty()).then(|| Claimed { names, in_flight: Arc::clone(&self.0) })
    }
}

impl Claimed {
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        for name in &self.names {
            in_flight.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_topic_in_flight_is_claimed_once_until_its_claim_is_dropped() {
        let creations = AutoCreations::default();
        let first = creations.claim(&names(&["a", "b"])).expect("both new");
        assert_eq!(first.names(), names(&["a", "b"]));
        let second = creations.claim(&names(&["b", "c"])).expect("c is new");
        assert_eq!(second.names(), names(&["c"]));
        assert!(creations.claim(&names(&["a", "c"])).is_none());
        drop(first);
        assert_eq!(creations.claim(&names(&["a", "b", "c"])).expect("a and b again").names(), names(&["a", "b"]));
    }
}
