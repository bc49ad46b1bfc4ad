"""Declares the C extension only; all metadata lives in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tls12._recordcrypto",
            sources=["tls12/_recordcrypto.c", "tls12/_recordcrypto_core.c"],
            depends=["tls12/_recordcrypto.h"],
            libraries=["crypto"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "sine._chaincrypto",
            sources=["sine/_chaincrypto.c"],
            libraries=["crypto"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
    ]
)
