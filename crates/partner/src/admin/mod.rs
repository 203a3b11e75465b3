//! The admin page's pure half: what it shows ([`model`]), the forms it reads ([`forms`]) and
//! the HTML of its six views ([`views`], framed by [`layout`]).
//!
//! The page is for the zone's operators (sys members) and shows full detail: clouds,
//! locations, plans, images, instance ids. It never shows a key: the views get the config and
//! read only whether a key is set ([`crate::params::Config::view`]).
//!
//! Invariants: no I/O, no clock (the time comes in [`model::PageState::now`]); every view is a
//! pure function of its inputs, so equal state gives equal bytes (the golden files rely on
//! it). The Quote preview runs [`crate::quote::quote`] and the Validate view
//! [`crate::validate::validate_drafts`], the code the partner itself runs, over the state they
//! are handed by reference: nothing here can reserve capacity or change a param. The server,
//! the gate and the live updates are the provider process's (`orc_partner_provider::admin`).

pub mod forms;
pub mod layout;
pub mod model;
pub mod views;

pub use model::{
    AddressKind, CloudSeen, InventorySeen, ListingFailure, OutOfStep, PageRole, PageState,
    ReplicaFacts, SeenAddress, SeenInstance, SeenNetwork, out_of_step,
};
