//! File helpers over glommio's io_uring files. Every call here must run on a glommio
//! executor: reads, writes, fsync, rename and unlink are io_uring operations, and
//! directory listing (which io_uring cannot do) runs on glommio's blocking-thread pool so
//! the shard thread never waits on the disk. Two shortcuts skip the ring when the kernel
//! can answer at once: reads of cached pages (`RWF_NOWAIT`), and small buffered writes
//! ([`InlineWrites`]: `RWF_NOWAIT` where the filesystem has it, else a timed `pwrite`
//! that backs off to io_uring when the kernel makes it wait).

use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use glommio::io::{BufferedFile, Directory, OpenOptions};

use crate::buffers::ReusedBuffers;

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

/// `syncfs(2)` of the filesystem holding `dir`: every write that completed before the
/// call is on the device once it returns (Linux reports writeback errors from it since
/// 5.8). It runs on a thread of its own, since it blocks for as long as the
/// filesystem's dirty data takes to write; one call replaces many `fdatasync`s, which
/// io_uring runs a few at a time on its bounded io-wq workers, while the kernel writes
/// a whole filesystem back with the device's full queue depth.
pub async fn sync_filesystem(dir: &Path) -> FsResult<()> {
    let (tx, rx) = async_channel::bounded(1);
    let path = dir.to_path_buf();
    std::thread::Builder::new()
        .name("twinlog-syncfs".into())
        .spawn(move || {
            let result = std::fs::File::open(&path)
                .and_then(|dir| rustix::fs::syncfs(&dir).map_err(io::Error::from));
            let _ = tx.send_blocking(result);
        })
        .map_err(fs_err("syncfs", dir))?;
    match rx.recv().await {
        Ok(result) => result.map_err(fs_err("syncfs", dir)),
        Err(_) => Err(FsError {
            op: "syncfs",
            path: dir.to_path_buf(),
            source: io::Error::other("the syncfs thread ended without an answer"),
        }),
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
    let mut out = vec![0u8; len];
    read_into(file, path, pos, &mut out).await?;
    Ok(out)
}

/// Fills `out` from `pos` through glommio (short reads are retried; EOF is an error).
async fn read_into(file: &BufferedFile, path: &Path, pos: u64, out: &mut [u8]) -> FsResult<()> {
    let mut got = 0;
    while got < out.len() {
        let chunk = file
            .read_at(pos + got as u64, out.len() - got)
            .await
            .map_err(fs_err("read", path))?;
        if chunk.is_empty() {
            return Err(FsError {
                op: "read",
                path: path.to_path_buf(),
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "wanted {} bytes at {pos}, file ended after {got}",
                        out.len()
                    ),
                ),
            });
        }
        out[got..got + chunk.len()].copy_from_slice(&chunk);
        got += chunk.len();
    }
    Ok(())
}

/// Fills `buf` from `pos` with what the page cache holds now, on `file`'s own fd;
/// returns how much. Stops early (short count, maybe 0) where the data is not cached or
/// the kernel cannot read without waiting; only real I/O errors are errors.
///
/// glommio's buffered reads land in a reactor-owned buffer that is not `Send`, so every
/// read was copied a second time into a `Vec` (see [`read_exact_at`]). `preadv2` with
/// `RWF_NOWAIT` copies cached pages straight into the `Vec` and returns instead of waiting
/// for the disk, so the shard never blocks; what it cannot read goes through glommio.
/// It reads through the glommio file's descriptor (a positioned read shares nothing with
/// glommio's use of it), so a segment holds one descriptor, not two.
fn read_cached(file: &BufferedFile, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    use rustix::io::{preadv2, Errno, ReadWriteFlags};
    let fd = borrowed_fd(file);
    let mut got = 0;
    while got < buf.len() {
        let mut slices = [io::IoSliceMut::new(&mut buf[got..])];
        match preadv2(fd, &mut slices, pos + got as u64, ReadWriteFlags::NOWAIT) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::INTR) => continue,
            // Not cached (AGAIN), or no RWF_NOWAIT here (OPNOTSUPP, NOSYS, INVAL).
            Err(Errno::AGAIN | Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(got)
}

/// `file`'s descriptor, borrowed for as long as `file` is.
#[allow(unsafe_code)]
fn borrowed_fd(file: &BufferedFile) -> std::os::fd::BorrowedFd<'_> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is `file`'s and stays open while `file` is borrowed: glommio
    // closes it only when the file is dropped or `close(self)`d, which takes it by value.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(file.as_raw_fd()) }
}

/// Segment read windows kept per shard thread for reuse once their `Bytes` are dropped
/// (a Fetch response sent): reads then land in warm memory without a memset first.
const READ_BUFFERS_KEPT: usize = 16;

thread_local! {
    static READ_BUFFERS: RefCell<ReusedBuffers> = RefCell::new(ReusedBuffers::keeping(READ_BUFFERS_KEPT));
}

/// [`read_exact_at`], first taking what the page cache holds (one copy, into a reused
/// buffer), then reading the rest through glommio (never blocking the shard).
pub async fn read_exact_at_cached(
    file: &BufferedFile,
    path: &Path,
    pos: u64,
    len: usize,
) -> FsResult<Bytes> {
    let mut buf = READ_BUFFERS.with(|b| b.borrow_mut().take(len));
    let got = read_cached(file, &mut buf[..len], pos).map_err(fs_err("read", path))?;
    if got < len {
        read_into(file, path, pos + got as u64, &mut buf[got..len]).await?;
    }
    Ok(READ_BUFFERS.with(|b| b.borrow_mut().frame(buf, len)))
}

/// Writes all of `buf` at `pos`. Small writes go inline when the kernel takes them
/// without waiting ([`InlineWrites`]); the rest move into the kernel's hands through
/// io_uring (no copy). A short write on a regular file only happens when the device is
/// full, and is reported as an error so the caller can cut the file back to its
/// previous size.
pub async fn write_all_at(
    file: &BufferedFile,
    path: &Path,
    buf: Vec<u8>,
    pos: u64,
) -> FsResult<()> {
    let len = buf.len();
    let inline = INLINE_WRITES.with(|w| w.borrow_mut().write(file, &buf, pos));
    let done = match inline {
        Inline::Done(n) => n,
        Inline::Declined => 0,
        Inline::Failed(e) => return Err(fs_err("write", path)(e)),
    };
    if done == len {
        return Ok(());
    }
    let rest = if done == 0 { buf } else { buf[done..].to_vec() };
    let written = file
        .write_at(rest, pos + done as u64)
        .await
        .map_err(fs_err("write", path))?;
    if done + written != len {
        return Err(FsError {
            op: "write",
            path: path.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::WriteZero,
                format!(
                    "short write: {} of {len} bytes at {pos} (device full?)",
                    done + written
                ),
            ),
        });
    }
    Ok(())
}

/// Buffered writes at most this large go inline by default (`inline.write.max.bytes`).
pub const DEFAULT_INLINE_WRITE_MAX_BYTES: usize = 64 << 10;

/// An inline write slower than this means the kernel made the shard wait (dirty-page
/// throttling, a journal commit): writes go through io_uring for a while.
const INLINE_SLOW: std::time::Duration = std::time::Duration::from_millis(1);
/// How long the first slow inline write sends writes to io_uring; each slow one after
/// it doubles the pause, up to [`INLINE_PAUSE_MAX`]; a fast one resets it.
const INLINE_PAUSE_MIN: std::time::Duration = std::time::Duration::from_secs(1);
const INLINE_PAUSE_MAX: std::time::Duration = std::time::Duration::from_secs(60);

thread_local! {
    static INLINE_WRITES: RefCell<InlineWrites> = RefCell::new(InlineWrites::new(DEFAULT_INLINE_WRITE_MAX_BYTES));
}

/// Sets shard `shard`'s inline-write bound (`inline.write.max.bytes`; 0: every write
/// through io_uring), on its own thread; its in-place writes are counted under it.
pub fn set_inline_write_max(shard: usize, bytes: usize) {
    INLINE_WRITES.with(|w| {
        let mut w = w.borrow_mut();
        *w = InlineWrites::new(bytes);
        w.counters = Some(crate::metrics::inline_write_counters(shard));
    });
}

/// What an inline write attempt did.
enum Inline {
    /// Bytes written (maybe fewer than asked; the rest goes through io_uring).
    Done(usize),
    /// Not attempted, or the kernel would have waited: all of it through io_uring.
    Declined,
    Failed(io::Error),
}

/// One shard's policy for small buffered writes. A buffered write that lands in the
/// page cache costs a few microseconds of copying, while its io_uring round trip costs
/// ~100 µs on a small VM: ext4 and other filesystems without async buffered writes make
/// io_uring hand every one to an io-wq worker thread, and the two thread switches are
/// the cost (perf/RESULTS.md, small batches). So a write of at most `max` bytes is made
/// in place: with `RWF_NOWAIT` where the filesystem supports it (the kernel refuses
/// instead of waiting, and the write goes through io_uring), else as a plain `pwrite`
/// timed on the way out; one that took longer than [`INLINE_SLOW`] (the kernel throttled
/// it) sends this shard's writes through io_uring for a pause, so a throttled disk does
/// not stall the shard's other work twice in a row.
#[derive(Debug)]
struct InlineWrites {
    max: usize,
    /// `false` once the filesystem refused `RWF_NOWAIT` for buffered writes.
    nowait: bool,
    /// Until then, every write goes through io_uring.
    paused_until: Option<std::time::Instant>,
    pause: std::time::Duration,
    /// `twinlog_inline_writes_total` and `_bytes_total` of this shard, once it is one.
    counters: Option<(
        prometheus_client::metrics::counter::Counter,
        prometheus_client::metrics::counter::Counter,
    )>,
}

impl InlineWrites {
    fn new(max: usize) -> InlineWrites {
        InlineWrites {
            max,
            nowait: true,
            paused_until: None,
            pause: INLINE_PAUSE_MIN,
            counters: None,
        }
    }

    fn count(&self, bytes: usize) -> Inline {
        if let Some((writes, total)) = &self.counters {
            writes.inc();
            total.inc_by(bytes as u64);
        }
        Inline::Done(bytes)
    }

    fn write(&mut self, file: &BufferedFile, buf: &[u8], pos: u64) -> Inline {
        use rustix::io::{pwritev2, Errno, ReadWriteFlags};
        if buf.is_empty() || buf.len() > self.max {
            return Inline::Declined;
        }
        if let Some(until) = self.paused_until {
            if std::time::Instant::now() < until {
                return Inline::Declined;
            }
            self.paused_until = None;
        }
        let fd = borrowed_fd(file);
        if self.nowait {
            match pwritev2(fd, &[io::IoSlice::new(buf)], pos, ReadWriteFlags::NOWAIT) {
                Ok(n) => return self.count(n),
                Err(Errno::AGAIN | Errno::INTR) => return Inline::Declined,
                Err(Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => self.nowait = false,
                Err(e) => return Inline::Failed(e.into()),
            }
        }
        let started = std::time::Instant::now();
        let written = pwritev2(fd, &[io::IoSlice::new(buf)], pos, ReadWriteFlags::empty());
        let took = started.elapsed();
        if took > INLINE_SLOW {
            self.paused_until = Some(std::time::Instant::now() + self.pause);
            tracing::debug!(?took, pause = ?self.pause, "inline write was slow; writing through io_uring for a while");
            self.pause = (self.pause * 2).min(INLINE_PAUSE_MAX);
        } else {
            self.pause = INLINE_PAUSE_MIN;
        }
        match written {
            Ok(n) => self.count(n),
            Err(Errno::INTR | Errno::AGAIN) => Inline::Declined,
            Err(e) => Inline::Failed(e.into()),
        }
    }
}

/// Replaces `path` atomically: write a temp file, fsync it, rename over, fsync the dir.
pub async fn write_atomic(path: &Path, data: Vec<u8>) -> FsResult<()> {
    let tmp = tmp_path(path);
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

fn tmp_path(path: &Path) -> PathBuf {
    path.with_extension(match path.extension() {
        Some(ext) => format!("{}.tmp", ext.to_string_lossy()),
        None => "tmp".to_string(),
    })
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

/// Whether `path` exists (a metadata look-up on the blocking pool).
pub async fn exists(path: &Path) -> bool {
    let owned = path.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || owned.exists())
        .await
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::run_glommio as run;

    #[test]
    fn cached_reads_return_the_bytes_written_and_fail_past_the_end() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f.log");
            let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
            let file = open_rw(&path).await.expect("open");
            write_all_at(&file, &path, data.clone(), 0)
                .await
                .expect("write");
            for (pos, len) in [(0, 10), (17, 1 << 20), (1 << 20, 1_900_000), (2_999_999, 1)] {
                // Twice: the second read may reuse the first one's buffer once dropped.
                for _ in 0..2 {
                    let got = read_exact_at_cached(&file, &path, pos as u64, len)
                        .await
                        .expect("read");
                    assert_eq!(&got[..], &data[pos..pos + len], "read {len} at {pos}");
                }
            }
            // A buffer still referenced is never handed out again.
            let held = read_exact_at_cached(&file, &path, 0, 1 << 20)
                .await
                .expect("read");
            let other = read_exact_at_cached(&file, &path, 1 << 20, 1 << 20)
                .await
                .expect("read");
            assert_eq!(&held[..], &data[..1 << 20]);
            assert_eq!(&other[..], &data[1 << 20..2 << 20]);
            let past = read_exact_at_cached(&file, &path, 2_999_990, 20).await;
            assert!(past.is_err(), "reading past the end must fail");
            file.close().await.expect("close");
        });
    }
}
