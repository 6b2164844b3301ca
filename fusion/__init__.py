"""Epilogue fusion (Conv + ReLU and friends) on the npu-jax emulator. Built in a later issue."""
