//! What the `orc` binary's end-to-end tests share.

#![allow(dead_code)]

pub mod load;
pub mod roll;
pub mod up;
