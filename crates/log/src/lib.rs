//! krabka-log: one partition's log on disk, in Apache Kafka's own format.
//!
//! It will hold segments (`<base offset>.log`), offset and time indexes,
//! recovery after an unclean shutdown, retention, compaction and producer
//! state. It must never lose an acknowledged record, never copy record bytes on
//! the read path (reads return file ranges for sendfile), and it knows nothing
//! of the network: the broker crate ties the log to sockets.
