//! Renders irqlab results: SVG plots, HTML pages, and atomic JSON/CSV writes.

pub mod contour;
pub mod html;
pub mod plot;
pub mod write;

pub use write::{follow_links, write_atomic, write_json};
