"""The disk-fault filesystem's tests; `needs_fuse` skips them where this machine cannot mount FUSE
(scripts/setup.sh installs fuse3 and pyfuse3 on the default and CI paths)."""

import pytest

from kraftlab.testing.diskfs_mounts import fuse_available

needs_fuse = pytest.mark.skipif(fuse_available() is not None, reason=str(fuse_available()))
