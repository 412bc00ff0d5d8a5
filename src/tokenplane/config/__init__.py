"""tokenplane.config"""
