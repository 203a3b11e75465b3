//! Credentials of the cloud clients: the vocabulary's one [`Secret`] type.

pub use orc_common::Secret;
