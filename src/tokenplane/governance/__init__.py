"""tokenplane.governance"""
