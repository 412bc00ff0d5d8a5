"""tokenplane.admission"""
