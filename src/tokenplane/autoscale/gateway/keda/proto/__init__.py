"""KEDA's ``externalscaler.proto`` (vendored, Apache-2.0, LICENSE.keda) and the
Python stubs ``scripts/gen-keda-stubs`` generates from it (committed; do not edit)."""
