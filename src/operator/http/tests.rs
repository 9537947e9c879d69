//! Unit tests of the HTTP server.
