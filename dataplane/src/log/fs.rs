//! File helpers over glommio's io_uring files. Every call here must run on a glommio
//! executor: reads, writes, fsync, rename and unlink are io_uring operations, and
//! directory listing (which io_uring cannot do) runs on glommio's blocking-thread pool so
//! the shard thread never blocks.

use std::io;
use std::path::{Path, PathBuf};

use glommio::io::{BufferedFile, Directory, OpenOptions};

/// Any I/O failure, with the path it concerned.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path}: {source}")]
pub struct FsError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

pub type FsResult<T> = Result<T, FsError>;

pub(crate) fn fs_err<E: Into<io::Error>>(
    op: &'static str,
    path: &Path,
) -> impl FnOnce(E) -> FsError {
    let path = path.to_path_buf();
    move |e| FsError {
        op,
        path,
        source: e.into(),
    }
}

/// Opens (creating if absent) a file for reading and writing without truncating it.
pub async fn open_rw(path: &Path) -> FsResult<BufferedFile> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .buffered_open(path)
        .await
        .map_err(fs_err("open", path))
}

/// Reads a whole file; `None` when it does not exist.
pub async fn read_all(path: &Path) -> FsResult<Option<Vec<u8>>> {
    let file = match BufferedFile::open(path).await {
        Ok(f) => f,
        Err(e) => {
            let e: io::Error = e.into();
            if e.kind() == io::ErrorKind::NotFound {
                return Ok(None);
            }
            return Err(FsError {
                op: "open",
                path: path.to_path_buf(),
                source: e,
            });
        }
    };
    let size = file.file_size().await.map_err(fs_err("stat", path))?;
    let data = read_exact_at(&file, path, 0, size as usize).await?;
    file.close().await.map_err(fs_err("close", path))?;
    Ok(Some(data))
}

/// Reads exactly `len` bytes at `pos` (short reads are retried; EOF is an error).
///
/// The bytes are copied once, out of glommio's read buffer into the returned `Vec`.
/// Handing glommio's buffer on instead (`Bytes::from_owner`) is not possible: its
/// `ReadResult` holds an `Rc` into the reactor, so it is neither `Send` nor safe to drop
/// on another thread, while the `Bytes` made from a read cross shards (a Fetch served on
/// one shard reads partitions owned by others).
pub async fn read_exact_at(
    file: &BufferedFile,
    path: &Path,
    pos: u64,
    len: usize,
) -> FsResult<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let chunk = file
            .read_at(pos + out.len() as u64, len - out.len())
            .await
            .map_err(fs_err("read", path))?;
        if chunk.is_empty() {
            return Err(FsError {
                op: "read",
                path: path.to_path_buf(),
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "wanted {len} bytes at {pos}, file ended after {}",
                        out.len()
                    ),
                ),
            });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Writes all of `buf` at `pos`. The buffer moves into the kernel's hands (no copy);
/// a short write on a regular file only happens when the device is full, and is
/// reported as an error so the caller can cut the file back to its previous size.
pub async fn write_all_at(
    file: &BufferedFile,
    path: &Path,
    buf: Vec<u8>,
    pos: u64,
) -> FsResult<()> {
    let len = buf.len();
    let written = file
        .write_at(buf, pos)
        .await
        .map_err(fs_err("write", path))?;
    if written != len {
        return Err(FsError {
            op: "write",
            path: path.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {written} of {len} bytes at {pos} (device full?)"),
            ),
        });
    }
    Ok(())
}

/// Replaces `path` atomically: write a temp file, fsync it, rename over, fsync the dir.
pub async fn write_atomic(path: &Path, data: Vec<u8>) -> FsResult<()> {
    let tmp = path.with_extension(match path.extension() {
        Some(ext) => format!("{}.tmp", ext.to_string_lossy()),
        None => "tmp".to_string(),
    });
    let file = BufferedFile::create(&tmp)
        .await
        .map_err(fs_err("create", &tmp))?;
    write_all_at(&file, &tmp, data, 0).await?;
    file.fdatasync().await.map_err(fs_err("fsync", &tmp))?;
    file.close().await.map_err(fs_err("close", &tmp))?;
    glommio::io::rename(&tmp, path)
        .await
        .map_err(fs_err("rename", &tmp))?;
    sync_dir(path.parent().unwrap_or(Path::new("."))).await
}

/// fsyncs a directory so renames and creations in it are durable.
pub async fn sync_dir(dir: &Path) -> FsResult<()> {
    let d = Directory::open(dir)
        .await
        .map_err(fs_err("open dir", dir))?;
    d.sync().await.map_err(fs_err("fsync dir", dir))?;
    d.close().await.map_err(fs_err("close dir", dir))
}

/// Creates a directory (and parents) on the blocking pool.
pub async fn create_dir_all(dir: &Path) -> FsResult<()> {
    let owned = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || std::fs::create_dir_all(&owned))
        .await
        .map_err(fs_err("create dir", dir))
}

/// Lists file names in a directory on the blocking pool.
pub async fn list_dir(dir: &Path) -> FsResult<Vec<String>> {
    let owned = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || -> io::Result<Vec<String>> {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(&owned)? {
                names.push(entry?.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            Ok(names)
        })
        .await
        .map_err(fs_err("list", dir))
}

/// Removes a file; a missing file is not an error.
pub async fn remove_file(path: &Path) -> FsResult<()> {
    match glommio::io::remove(path).await {
        Ok(()) => Ok(()),
        Err(e) => {
            let e: io::Error = e.into();
            if e.kind() == io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(FsError {
                    op: "remove",
                    path: path.to_path_buf(),
                    source: e,
                })
            }
        }
    }
}

/// Removes a directory and everything in it (blocking pool).
pub async fn remove_dir_all(dir: &Path) -> FsResult<()> {
    let owned = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || std::fs::remove_dir_all(&owned))
        .await
        .map_err(fs_err("remove dir", dir))
}

/// Writes `data` at `pos` of `path` (created if absent) and truncates the file to
/// `pos + data.len()`: how derived index files are kept equal to their in-memory copy.
pub async fn write_tail(path: &Path, data: Vec<u8>, pos: u64, sync: bool) -> FsResult<()> {
    let end = pos + data.len() as u64;
    let file = open_rw(path).await?;
    if !data.is_empty() {
        write_all_at(&file, path, data, pos).await?;
    }
    let size = file.file_size().await.map_err(fs_err("stat", path))?;
    if size != end {
        file.truncate(end).await.map_err(fs_err("truncate", path))?;
    }
    if sync {
        file.fdatasync().await.map_err(fs_err("fsync", path))?;
    }
    file.close().await.map_err(fs_err("close", path))
}
