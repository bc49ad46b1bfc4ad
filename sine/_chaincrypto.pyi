"""Type stub for the C extension ``sine._chaincrypto`` (see sine/chaincrypto.py)."""

MIN_BLOCK_SIZE: int
MAX_BLOCK_SIZE: int
GIL_RELEASE_BYTES: int

def verify_run(
    hash_name: str,
    block_size: int,
    trusted: bytes,
    data: bytes | bytearray | memoryview,
    max_records: int,
    links: bytes | bytearray | memoryview | None = None,
    /,
) -> tuple[list[bytes], bytes, bool]: ...

def verify_run_joined(
    hash_name: str,
    block_size: int,
    trusted: bytes,
    data: bytes | bytearray | memoryview,
    max_records: int,
    links: bytes | bytearray | memoryview | None = None,
    /,
) -> tuple[bytes, bytes, bool]: ...
