"""tokenplane.api"""
