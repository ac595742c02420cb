//! Process exit codes, a leaf so that any step of the start-up can name them.

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
