//! Record batches (magic v2): zero-copy views, CRC-32C validation, in-place patching, a builder.
