"""tokenplane.observe"""
