//! A sensitive value (a cloud API key): the vocabulary's one [`Secret`], whose `Debug` and
//! `Display` never show a character of it.

pub use orc_common::Secret;
