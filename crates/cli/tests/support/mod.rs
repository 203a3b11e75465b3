//! What the `orc` binary's end-to-end tests share.

#![allow(dead_code)]

pub mod roll;
pub mod up;
