"""tokenplane.tokens"""
