//! The vocabulary tables, from the files of `data/` (each describes its format at
//! its top), turned into constant slices at build time by `build.rs`: what
//! `synonyms.rs` builds its lookup from, and the stopword list `text.rs` searches.

include!(concat!(env!("OUT_DIR"), "/tables.rs"));
