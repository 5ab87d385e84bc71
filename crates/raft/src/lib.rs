//! krabka-raft: the controller quorum, for when a cluster grows past one node.
//!
//! It will replicate the `__cluster_metadata` log between controllers with
//! KRaft's protocol (Vote, BeginQuorumEpoch, Fetch, FetchSnapshot). A single
//! combined node needs none of it; it must never be on the produce hot path.
