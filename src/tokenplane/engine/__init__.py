"""tokenplane.engine"""
