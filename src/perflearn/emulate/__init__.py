"""perflearn.emulate"""
