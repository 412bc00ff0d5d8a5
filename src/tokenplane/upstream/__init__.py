"""tokenplane.upstream"""
