//! Request and response framing: the size prefix and the request/response headers.
