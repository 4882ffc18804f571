//! The index of the newest snapshot, and the embedding of each new one in the
//! background.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::document::Corpus;
use crate::embed::Embedder;
use crate::{SearchIndex, fuse};

/// The vectors of the last snapshot embedded, by the text embedded.
type Memo = Arc<Mutex<HashMap<String, Arc<[f32]>>>>;

/// The index of the newest catalog snapshot searched, built on the first search of
/// each snapshot (catalogs change rarely, searches often). A snapshot is a
/// [`Corpus`] behind an `Arc`: the same `Arc` is the same snapshot.
///
/// With an embedding model ([`SearchCache::with_embedder`]), a new index is searched
/// by words at once while a background thread embeds the catalog's tools; the
/// vectors join the index when all are done. Vectors of tools whose text did not
/// change are reused from the previous snapshot, so a reload that adds one upstream
/// embeds only its tools.
pub struct SearchCache<C> {
    newest: Mutex<Option<(Arc<C>, Arc<SearchIndex>)>>,
    embedder: Option<Arc<Embedder>>,
    /// The vectors of the last snapshot embedded, by text: what the next one reuses.
    memo: Memo,
}

impl<C> Default for SearchCache<C> {
    fn default() -> Self {
        SearchCache {
            newest: Mutex::new(None),
            embedder: None,
            memo: Memo::default(),
        }
    }
}

impl<C: Corpus + Send + Sync + 'static> SearchCache<C> {
    /// The index of `catalog`, built now unless it is the one cached.
    pub fn index_for(&self, catalog: &Arc<C>) -> Arc<SearchIndex> {
        let mut newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        match newest.as_ref() {
            Some((source, index)) if Arc::ptr_eq(source, catalog) => index.clone(),
            _ => {
                let index = Arc::new(SearchIndex::build(&**catalog));
                *newest = Some((catalog.clone(), index.clone()));
                if let Some(embedder) = &self.embedder {
                    embed_in_background(
                        catalog.clone(),
                        &index,
                        embedder.clone(),
                        self.memo.clone(),
                    );
                }
                index
            }
        }
    }

    /// Whether `catalog`'s index is built: a search of another catalog builds it
    /// first (tens of milliseconds for a thousand tools).
    pub fn has_index_for(&self, catalog: &Arc<C>) -> bool {
        let newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        newest
            .as_ref()
            .is_some_and(|(source, _)| Arc::ptr_eq(source, catalog))
    }

    /// Whether searches run an embedding model (a query then costs milliseconds).
    pub fn embeds(&self) -> bool {
        self.embedder.is_some()
    }

    /// A cache whose indexes fuse `embedder`'s similarity in (none: words only).
    pub fn with_embedder(embedder: Option<Arc<Embedder>>) -> SearchCache<C> {
        SearchCache {
            embedder,
            ..SearchCache::default()
        }
    }

    /// A cache for another line of snapshots (a user's own catalog beside the shared
    /// one) with this one's model and the vectors it has made: only texts new to both
    /// are embedded for it.
    pub fn sibling(&self) -> SearchCache<C> {
        SearchCache {
            newest: Mutex::new(None),
            embedder: self.embedder.clone(),
            memo: self.memo.clone(),
        }
    }

    /// With an embedding model, builds `catalog`'s index now, so that its tools are
    /// embedded before the first search asks; without one, nothing (the index is
    /// built by the first search, as it costs nothing to wait).
    pub fn warm(&self, catalog: &Arc<C>) {
        if self.embedder.is_some() {
            self.index_for(catalog);
        }
    }
}

/// Embeds `catalog` on a thread of its own (a model costs milliseconds per tool, far
/// too long for the async runtime or the first search) and hands the vectors to
/// `index` when all are done. Gives up as soon as the index is no longer in use (a
/// newer snapshot replaced it).
fn embed_in_background<C: Corpus + Send + Sync + 'static>(
    catalog: Arc<C>,
    index: &Arc<SearchIndex>,
    embedder: Arc<Embedder>,
    memo: Memo,
) {
    let index = Arc::downgrade(index);
    let spawned = std::thread::Builder::new()
        .name("search-embed".to_owned())
        .spawn(move || {
            let started = std::time::Instant::now();
            let known = |text: &str| {
                let memo = memo.lock().unwrap_or_else(|e| e.into_inner());
                memo.get(text).cloned()
            };
            let texts = fuse::embedding_texts(&*catalog);
            let mut kept: HashMap<String, Arc<[f32]>> = HashMap::new();
            let mut rows = Vec::with_capacity(texts.size_hint().0);
            let mut embedded = 0usize;
            for text in texts {
                if index.strong_count() == 0 {
                    // A newer snapshot replaced this one: leave what was done for it.
                    memo.lock().unwrap_or_else(|e| e.into_inner()).extend(kept);
                    return;
                }
                let vector = match kept.get(&text).cloned().or_else(|| known(&text)) {
                    Some(v) => v,
                    None => {
                        embedded += 1;
                        Arc::from(embedder.embed(&text))
                    }
                };
                rows.push(vector.clone());
                kept.insert(text, vector);
            }
            *memo.lock().unwrap_or_else(|e| e.into_inner()) = kept;
            if let Some(index) = index.upgrade() {
                index.set_vectors(embedder, &rows);
                tracing::info!(
                    tools = rows.len(),
                    embedded,
                    ms = started.elapsed().as_millis() as u64,
                    "tool_search: catalog embedded"
                );
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "tool_search: could not start the embedding thread; searching by words");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample;

    /// The cache says which snapshot's index it holds: the one a search built, not a
    /// newer snapshot (whose first search builds it, off the runtime's thread).
    #[test]
    fn the_cache_knows_which_catalog_it_has_indexed() {
        let cache = SearchCache::default();
        let first = std::sync::Arc::new(sample());
        assert!(!cache.has_index_for(&first));
        let hits = cache.index_for(&first).search("pull", 10, |_| true);
        assert!(!hits.is_empty());
        assert!(cache.has_index_for(&first));
        let newer = std::sync::Arc::new(sample());
        assert!(
            !cache.has_index_for(&newer),
            "a new snapshot has no index yet"
        );
        cache.index_for(&newer);
        assert!(cache.has_index_for(&newer) && !cache.has_index_for(&first));
    }
}
