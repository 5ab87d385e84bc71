//! The states of a transactional id, as Kafka's transaction coordinator
//! names and numbers them (the number is what `__transaction_state`
//! stores, the name what DescribeTransactions and ListTransactions report).

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransactionState {
    /// No transaction open (a new id, or one whose producer re-initialized).
    Empty,
    /// A transaction open: partitions were added to it.
    Ongoing,
    /// The producer asked to commit; markers are being written.
    PrepareCommit,
    /// The producer (or a timeout, or a newer producer) asked to abort;
    /// markers are being written.
    PrepareAbort,
    /// Every partition has its commit marker.
    CompleteCommit,
    /// Every partition has its abort marker.
    CompleteAbort,
    /// The id expired; its tombstone is being written.
    Dead,
    /// An open transaction whose producer was fenced (a newer one, a
    /// timeout) before it is aborted; never written as such (the abort is).
    PrepareEpochFence,
}

use TransactionState::*;

impl TransactionState {
    pub const ALL: [TransactionState; 8] =
        [Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence];

    /// The byte `__transaction_state` stores.
    pub fn id(self) -> i8 {
        match self {
            Empty => 0,
            Ongoing => 1,
            PrepareCommit => 2,
            PrepareAbort => 3,
            CompleteCommit => 4,
            CompleteAbort => 5,
            Dead => 6,
            PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.id() == id)
    }

    /// The name the admin APIs report (Kafka's `TransactionState.stateName`).
    pub fn name(self) -> &'static str {
        match self {
            Empty => "Empty",
            Ongoing => "Ongoing",
            PrepareCommit => "PrepareCommit",
            PrepareAbort => "PrepareAbort",
            CompleteCommit => "CompleteCommit",
            CompleteAbort => "CompleteAbort",
            Dead => "Dead",
            PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.name() == name)
    }

    /// The states a transactional id may move to this one from.
    pub fn valid_previous(self) -> &'static [TransactionState] {
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// True once the id's last transaction is over (nothing pending).
    pub fn is_complete(self) -> bool {
        matches!(self, Empty | CompleteCommit | CompleteAbort)
    }

    /// True while markers are (to be) written.
    pub fn is_preparing(self) -> bool {
        matches!(self, PrepareCommit | PrepareAbort)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip() {
        for state in TransactionState::ALL {
            assert_eq!(TransactionState::from_id(state.id()), Some(state));
            assert_eq!(TransactionState::from_name(state.name()), Some(state));
        }
        assert_eq!(TransactionState::from_id(8), None);
        assert_eq!(TransactionState::from_name("Bogus"), None);
    }

    #[test]
    fn a_transaction_completes_only_as_it_was_prepared() {
        assert!(!CompleteCommit.valid_previous().contains(&PrepareAbort));
        assert!(!CompleteAbort.valid_previous().contains(&PrepareCommit));
        assert!(!PrepareCommit.valid_previous().contains(&Empty));
        assert!(Dead.valid_previous().iter().all(|s| s.is_complete()));
    }
}
