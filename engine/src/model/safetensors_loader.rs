//! Weights from the `*.safetensors` files of a checkpoint directory.
//!
//! Contract: every `*.safetensors` file in the directory is read (sharded
//! checkpoints need no index file; a tensor present in two shards is an
//! error). Each tensor that [`super::weights::tensor_specs`] lists must exist
//! with exactly that shape; bf16 is taken as is, f16 and f32 are rounded to
//! bf16. Extra tensors (for example a tied `lm_head.weight`) are ignored.
//! [`shard_files`] says whether a directory holds a checkpoint at all.

use super::config::{ModelError, Qwen3Config};
use super::weights::{HostTensor, Qwen3Weights};
use half::{bf16, f16};
use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub fn load_dir(dir: &Path, config: &Qwen3Config) -> Result<Qwen3Weights, ModelError> {
    let files = shard_files(dir)?;
    if files.is_empty() {
        return Err(io_error(
            dir,
            "no *.safetensors file in this directory".into(),
        ));
    }
    let buffers = files
        .iter()
        .map(|p| std::fs::read(p).map_err(|e| io_error(p, e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let mut shards = Vec::with_capacity(buffers.len());
    for (path, bytes) in files.iter().zip(&buffers) {
        let st = SafeTensors::deserialize(bytes).map_err(|e| io_error(path, e.to_string()))?;
        shards.push(st);
    }
    let mut location: HashMap<String, usize> = HashMap::new();
    for (i, st) in shards.iter().enumerate() {
        for name in st.names() {
            if let Some(first) = location.insert(name.to_string(), i) {
                return Err(io_error(
                    &files[i],
                    format!("tensor {name} is also in {}", files[first].display()),
                ));
            }
        }
    }
    Qwen3Weights::from_fn(config, |name, shape| {
        let shard = location
            .get(name)
            .ok_or_else(|| ModelError::MissingTensor {
                name: name.to_string(),
            })?;
        let view = shards[*shard]
            .tensor(name)
            .map_err(|e| io_error(&files[*shard], e.to_string()))?;
        if view.shape() != shape {
            return Err(ModelError::BadShape {
                name: name.to_string(),
                found: view.shape().to_vec(),
                expected: shape.to_vec(),
            });
        }
        let data = to_bf16(name, view.dtype(), view.data())?;
        Ok(HostTensor {
            shape: shape.to_vec(),
            data,
        })
    })
}

/// The `*.safetensors` files of `dir`, sorted by name (none: not a checkpoint).
pub fn shard_files(dir: &Path) -> Result<Vec<PathBuf>, ModelError> {
    let entries = std::fs::read_dir(dir).map_err(|e| io_error(dir, e.to_string()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| io_error(dir, e.to_string()))?.path();
        if path.extension().is_some_and(|ext| ext == "safetensors") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Little-endian raw bytes (the safetensors layout) to bf16.
fn to_bf16(name: &str, dtype: Dtype, bytes: &[u8]) -> Result<Vec<bf16>, ModelError> {
    let data = match dtype {
        Dtype::BF16 => bytes
            .chunks_exact(2)
            .map(|b| bf16::from_bits(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
        Dtype::F16 => bytes
            .chunks_exact(2)
            .map(|b| bf16::from_f32(f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()))
            .collect(),
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|b| bf16::from_f32(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .collect(),
        other => {
            return Err(ModelError::BadDtype {
                name: name.to_string(),
                found: format!("{other:?}"),
            })
        }
    };
    Ok(data)
}

fn io_error(path: &Path, message: String) -> ModelError {
    ModelError::Io {
        path: path.display().to_string(),
        message,
    }
}
