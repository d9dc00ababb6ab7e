//! The survey's steps on the live machine.
