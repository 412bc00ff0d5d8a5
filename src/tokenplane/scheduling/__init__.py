"""tokenplane.scheduling"""
