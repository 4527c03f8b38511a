"""kraftlab's own FUSE filesystem for disk faults, as Jepsen runs data directories on LazyFS.

A passthrough to a backing directory (pyfuse3 over libfuse3) that keeps POSIX durability semantics
strictly: a file's data is durable only once the file is fsynced (fsync or fdatasync), and a
create, rename, unlink, mkdir or rmdir only once its directory is fsynced. On a `crash` command
(sent together with the kill of the process using it) everything not yet durable is dropped:
files roll back to their last fsynced bytes, directories to their last fsynced entries. The same
control channel makes chosen operations fail (EIO, ENOSPC) on chosen files and delays fsyncs.

Modules: `durability` (what is durable, and the rollback), `faults` (error and delay rules),
`fs` (the FUSE operations), `control` (the control socket's protocol, server and client),
`mount` (mounting, unmounting, the command line: `python -m kraftlab.nemesis.diskfs`).
"""
