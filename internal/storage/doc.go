// Package storage keeps every file the service holds (uploads, results, error reports, temp
// outputs) behind one small interface, Store, with two backends: Local, a directory (the data
// dir, the one-box default, laid out as it always has been) and S3, a bucket on any
// S3-compatible service through minio-go, so API and worker nodes need no shared disk.
//
// Keys are clean slash-separated relative paths ("uploads/<sha256>.xlsx",
// "results/tsk_X-a1.xlsx"); ValidKey refuses anything that could escape the local root or
// mean different things on the two backends.
//
// # Writes are whole or absent
//
// Put streams: the local backend writes a temp file in <root>/tmp (the same filesystem),
// fsyncs it and renames it into place; the s3 backend sends a single PUT for small or sized
// bodies and a multipart upload for bodies of unknown length, holding one part
// (Config.PartSize) in memory at a time. Either way a reader sees the old object, the new
// one, or none, never part of one; a failed upload leaves nothing behind (multipart uploads
// are aborted). Only a live process can abort its own, though: the parts of a process killed
// mid-upload stay in the bucket until AbortIncomplete, which the cleanup round runs, aborts
// the upload once it is older than the temp TTL.
//
// # Results: a local temp file, uploaded on commit
//
// Exports and error reports are written by excelize, which needs a seekable local file (its
// StreamWriter spills to temp files and the zip is finished by seeking back), so writers get
// a local scratch file from CreateTemp and hand it to Commit, which renames it (local) or
// uploads it (s3). We do not stream the workbook into a multipart upload as it is written:
// excelize cannot produce a zip in one forward pass, and an object committed while the write
// might still fail would not be whole. Uploading the finished file on commit reads it with
// ReadAt in parallel parts, so memory stays flat whatever its size, and the object appears
// in one step when the upload completes. The cost is local disk for one result at a time
// per running export, which a worker has.
//
// # Imports: ranged reads
//
// An .xlsx is a zip, whose directory sits at the end: reading it needs random access. Open
// returns an Object that is an io.ReaderAt, so archive/zip.NewReader(obj, obj.Size()) works
// on both backends: locally it is the file itself; on s3 each ReadAt is a ranged GET, with a
// small read-ahead cache (4 × 1 MiB per open object) so zip's 4 KiB reads cost about one
// request per MiB. Every read is pinned to the ETag Open saw, so an object overwritten
// mid-read fails with ErrChanged instead of mixing versions. SpoolLocal is the alternative
// for a reader that insists on a local file: a streaming copy into the scratch dir through a
// fixed buffer.
//
// # Uploads: streamed under incoming/, then moved
//
// An upload's key is its content hash, known only once the last byte has arrived, so the
// API Puts the request body (hashing it on the way, no local copy) under
// incoming/<random>, inspects the stored object through Open, and Moves it to
// uploads/<sha256>.<format>: a rename locally, a server-side copy and a delete on s3.
// Whatever an API that died mid-upload leaves under incoming/ is swept after the temp TTL.
//
// # Scratch is per node
//
// CreateTemp files, reader spills and SpoolLocal copies live in <data dir>/tmp (TempDir) on
// both backends, never shared: partial outputs of an attempt are local scratch, and each
// node sweeps its own (ListTemp, RemoveTemp, RemoveAttemptTemp). Naming helpers
// (AttemptPrefix, TempOwner, ResultOwner) say whose an entry is.
//
// # Downloads: presign or stream
//
// With s3, Presign returns a time-limited URL the API can redirect the browser to, with the
// Content-Disposition (ContentDisposition: an ASCII fallback plus the RFC 5987 UTF-8 name,
// so 客户导出.xlsx arrives as 客户导出.xlsx) set through the signed
// response-content-disposition parameter, so the bytes never pass through the API. When
// presigning is off, or on the local backend, Presign answers ok=false and the API streams
// the object from Open with the same header.
package storage
