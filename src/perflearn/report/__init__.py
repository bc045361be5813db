"""perflearn.report"""
