//! Compression codecs for record batches: gzip, snappy (raw and xerial framing), lz4 (frame), zstd.
