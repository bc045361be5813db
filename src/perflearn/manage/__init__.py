"""perflearn.manage"""
