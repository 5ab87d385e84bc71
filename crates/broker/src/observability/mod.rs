//! Metrics, logs and profiles (placeholder, being filled in).
